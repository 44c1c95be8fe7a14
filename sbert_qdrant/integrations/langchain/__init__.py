"""LangChain integration (``pip install "sbert-qdrant[langchain]"``).

``SbertEmbeddings``: a SentenceEncoder as LangChain ``Embeddings``. ``SbertQdrantVectorStore``: a LangChain
``VectorStore`` over a TextCollection / AsyncTextCollection. ``LangChainEncoder``: any LangChain ``Embeddings`` as the
encoder of a collection.
"""

from __future__ import annotations

try:
    import langchain_core  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "sbert_qdrant.integrations.langchain needs langchain-core: pip install 'sbert-qdrant[langchain]'"
    ) from exc

from ._records import document_id, query_filter
from .embeddings import LangChainEncoder, SbertEmbeddings, as_encoder
from .vectorstore import SbertQdrantVectorStore

__all__ = ["LangChainEncoder", "SbertEmbeddings", "SbertQdrantVectorStore", "as_encoder", "document_id", "query_filter"]
