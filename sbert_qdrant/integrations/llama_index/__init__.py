"""LlamaIndex integration (``pip install "sbert-qdrant[llama-index]"``).

``SbertEmbedding``: a SentenceEncoder as a LlamaIndex ``BaseEmbedding``, for LlamaIndex's own ``QdrantVectorStore``
(nodes, ``ref_doc_id``, metadata filters, sync and async are LlamaIndex's). ``node_id``: deterministic node ids for
its text splitters (``SentenceSplitter(id_func=node_id)``), so that ingesting the same documents again overwrites
their points instead of adding new ones.
"""

from __future__ import annotations

try:
    import llama_index.core  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "sbert_qdrant.integrations.llama_index needs llama-index-core: pip install 'sbert-qdrant[llama-index]'"
    ) from exc

from .embedding import SbertEmbedding, node_id

__all__ = ["SbertEmbedding", "node_id"]
