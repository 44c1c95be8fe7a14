"""LangChain integration (``pip install "sbert-qdrant[langchain]"``).

``SbertEmbeddings``: a SentenceEncoder as LangChain ``Embeddings``. ``SbertQdrantVectorStore``: a LangChain
``VectorStore`` over a TextCollection / AsyncTextCollection. ``LangChainEncoder``: any LangChain ``Embeddings`` as the
encoder of a collection. ``SbertDocumentRetriever``: the documents of a collection (``upsert_documents``), one
LangChain ``Document`` per stored document.
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
from .retriever import SbertDocumentRetriever
from .vectorstore import SbertQdrantVectorStore

__all__ = [
    "LangChainEncoder",
    "SbertDocumentRetriever",
    "SbertEmbeddings",
    "SbertQdrantVectorStore",
    "as_encoder",
    "document_id",
    "query_filter",
]
