"""LlamaIndex integration (``pip install "sbert-qdrant[llama-index]"``).

``SbertEmbedding``: a SentenceEncoder as a LlamaIndex ``BaseEmbedding``, for LlamaIndex's own ``QdrantVectorStore``
(nodes, ``ref_doc_id``, metadata filters, sync and async are LlamaIndex's). ``node_id``: deterministic node ids for
its text splitters (``SentenceSplitter(id_func=node_id)``), so that ingesting the same documents again overwrites
their points instead of adding new ones. ``SbertDocumentRetriever``: the documents of a sbert-qdrant collection
(``upsert_documents``), one node per stored document.
"""

from __future__ import annotations

try:
    import llama_index.core  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "sbert_qdrant.integrations.llama_index needs llama-index-core: pip install 'sbert-qdrant[llama-index]'"
    ) from exc

from .embedding import SbertEmbedding, node_id
from .retriever import SbertDocumentRetriever

__all__ = ["SbertDocumentRetriever", "SbertEmbedding", "node_id"]
