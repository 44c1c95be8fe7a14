"""Adapters for RAG frameworks, each an optional extra; the core never imports them.

- ``sbert_qdrant.integrations.langchain`` (``pip install "sbert-qdrant[langchain]"``): ``SbertEmbeddings`` and
  ``SbertQdrantVectorStore``.
- ``sbert_qdrant.integrations.llama_index`` (``pip install "sbert-qdrant[llama-index]"``): ``SbertEmbedding``, for
  LlamaIndex's own ``QdrantVectorStore``.
- ``sbert_qdrant.integrations.ray`` (``pip install "sbert-qdrant[ray]"``): ``upsert_dataset``, Ray Data datasets
  encoded by actor pools (GPUs where asked) and written into a collection.
"""

from __future__ import annotations

__all__: list[str] = []
