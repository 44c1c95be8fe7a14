"""LangChain's own standard test suites (``langchain-tests``), unmodified, over the LangChain integration.

The vector store suites run on embedded Qdrant Edge and on qdrant-client in memory, over a TextCollection (sync
methods native, async ones in a worker thread) and over an AsyncTextCollection (async methods native; the sync
tests skip, saying so). Their embeddings are the suite's own ``get_embeddings()`` (LangChain's
``DeterministicFakeEmbedding``, through ``LangChainEncoder``), and, in two more classes, ``SbertEmbeddings``.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_tests")

from langchain_core.embeddings import Embeddings
from langchain_tests.integration_tests import EmbeddingsIntegrationTests, VectorStoreIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests
from qdrant_client import AsyncQdrantClient, QdrantClient

from sbert_qdrant import AsyncTextCollection, SentenceEncoder, TextCollection, testing
from sbert_qdrant.integrations.langchain import SbertEmbeddings, SbertQdrantVectorStore, as_encoder


@functools.cache
def tiny() -> SentenceEncoder:
    return testing.tiny_encoder()


@functools.cache
def default_model() -> SentenceEncoder:
    return SentenceEncoder.load(device="cpu")


@functools.cache
def tiny_model_folder() -> str:
    """The tiny encoder saved as a model folder (for loading by name, from the environment)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="sbq_tiny_model_")) / "tiny"
    tiny().save(folder)
    return str(folder)


# -- embeddings ------------------------------------------------------------------------------------------------------


class TestSbertEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[Embeddings]:
        return SbertEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"encoder": tiny()}

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        folder = tiny_model_folder()
        return {"SBERT_QDRANT_MODEL": folder, "SBERT_QDRANT_DEVICE": "cpu"}, {}, {"model_name": folder}


@pytest.mark.slow
class TestSbertEmbeddingsIntegration(EmbeddingsIntegrationTests):
    """On the real default model (all-MiniLM-L6-v2, from its installed package)."""

    @property
    def embeddings_class(self) -> type[Embeddings]:
        return SbertEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"encoder": default_model()}


# -- vector store ----------------------------------------------------------------------------------------------------


class TestEdgeSync(VectorStoreIntegrationTests):
    """Qdrant Edge in a temporary folder, through a TextCollection."""

    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[SbertQdrantVectorStore]:
        collection = TextCollection("standard", as_encoder(self.get_embeddings()), location=tmp_path / "qdrant")
        store = SbertQdrantVectorStore(collection)
        yield store
        store.close()


class TestEdgeSyncHybrid(VectorStoreIntegrationTests):
    """As TestEdgeSync, every search in hybrid mode (dense + BM25, fused by the engine)."""

    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[SbertQdrantVectorStore]:
        collection = TextCollection("standard", as_encoder(self.get_embeddings()), location=tmp_path / "qdrant")
        store = SbertQdrantVectorStore(collection, mode="hybrid")
        yield store
        store.close()


class TestEdgeAsync(VectorStoreIntegrationTests):
    """Qdrant Edge through an AsyncTextCollection: async methods only."""

    @property
    def has_sync(self) -> bool:
        return False

    @pytest.fixture
    async def vectorstore(self, tmp_path: Path) -> AsyncIterator[SbertQdrantVectorStore]:
        collection = AsyncTextCollection("standard", as_encoder(self.get_embeddings()), location=tmp_path / "qdrant")
        store = SbertQdrantVectorStore(collection)
        yield store
        await store.aclose()


class TestMemorySync(VectorStoreIntegrationTests):
    """qdrant-client's local mode (``QdrantClient(":memory:")``), through a TextCollection."""

    @pytest.fixture
    def vectorstore(self) -> Iterator[SbertQdrantVectorStore]:
        collection = TextCollection("standard", as_encoder(self.get_embeddings()), client=QdrantClient(":memory:"))
        store = SbertQdrantVectorStore(collection)
        yield store
        store.close()


class TestMemoryAsync(VectorStoreIntegrationTests):
    """qdrant-client's local mode (``AsyncQdrantClient(":memory:")``), through an AsyncTextCollection."""

    @property
    def has_sync(self) -> bool:
        return False

    @pytest.fixture
    async def vectorstore(self) -> AsyncIterator[SbertQdrantVectorStore]:
        client = AsyncQdrantClient(location=":memory:")
        store = SbertQdrantVectorStore(
            AsyncTextCollection("standard", as_encoder(self.get_embeddings()), client=client)
        )
        yield store
        await store.aclose()
        await client.close()


class TestEdgeSyncSbertEmbeddings(VectorStoreIntegrationTests):
    """TestEdgeSync with SbertEmbeddings (a tiny random BERT) in place of the suite's fake embeddings."""

    @staticmethod
    def get_embeddings() -> Embeddings:
        return SbertEmbeddings(encoder=tiny())

    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[SbertQdrantVectorStore]:
        store = SbertQdrantVectorStore.from_texts([], self.get_embeddings(), location=tmp_path / "qdrant")
        yield store
        store.close()


class TestMemoryAsyncSbertEmbeddings(VectorStoreIntegrationTests):
    """TestMemoryAsync with SbertEmbeddings (a tiny random BERT) in place of the suite's fake embeddings."""

    @property
    def has_sync(self) -> bool:
        return False

    @staticmethod
    def get_embeddings() -> Embeddings:
        return SbertEmbeddings(encoder=tiny())

    @pytest.fixture
    async def vectorstore(self) -> AsyncIterator[SbertQdrantVectorStore]:
        client = AsyncQdrantClient(location=":memory:")
        store = await SbertQdrantVectorStore.afrom_texts([], self.get_embeddings(), client=client)
        yield store
        await store.aclose()
        await client.close()
