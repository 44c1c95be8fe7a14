"""mcp-server-qdrant 0.8 (the anchor of benchmarks/mcp_startup.py) over stdio, run by ITS OWN interpreter (a venv with
``pip install mcp-server-qdrant==0.8.1``): its server, settings and tools as they are, with one change: FastEmbed
cannot download its model here, so its embedding provider is FastEmbed's TextEmbedding on the same all-MiniLM-L6-v2
ONNX export, loaded from a folder (``benchmarks/peers/setup.sh`` writes ``<model>/fastembed``), under the vector
name the anchor gives that model (``fast-all-minilm-l6-v2``).

    <anchor venv>/bin/python benchmarks/peers/mcp_anchor.py <model folder>/fastembed [--http]   (env: as the anchor
    reads it; --http: streamable HTTP on FASTMCP_SERVER_PORT instead of stdio)
"""

from __future__ import annotations

import asyncio
import sys

from fastembed import TextEmbedding
from fastembed.common.model_description import ModelSource, PoolingType
from mcp_server_qdrant.embeddings.base import EmbeddingProvider
from mcp_server_qdrant.mcp_server import QdrantMCPServer
from mcp_server_qdrant.settings import QdrantSettings, ToolSettings

NAME = "sbert-qdrant-local/all-MiniLM-L6-v2"


class LocalFastEmbed(EmbeddingProvider):
    """FastEmbed on a local ONNX export (mean pooling, normalized: all-MiniLM-L6-v2's modules)."""

    def __init__(self, folder: str) -> None:
        TextEmbedding.add_custom_model(
            model=NAME,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf=NAME),
            dim=384,
            model_file="onnx/model.onnx",
        )
        self.model = TextEmbedding(model_name=NAME, specific_model_path=folder)

    async def embed_documents(self, documents: list[str]) -> list[list[float]]:
        vectors = await asyncio.to_thread(lambda: list(self.model.passage_embed(documents)))
        return [v.tolist() for v in vectors]

    async def embed_query(self, query: str) -> list[float]:
        vectors = await asyncio.to_thread(lambda: list(self.model.query_embed([query])))
        return vectors[0].tolist()

    def get_vector_name(self) -> str:
        return "fast-all-minilm-l6-v2"

    def get_vector_size(self) -> int:
        return 384


if __name__ == "__main__":
    QdrantMCPServer(
        tool_settings=ToolSettings(), qdrant_settings=QdrantSettings(), embedding_provider=LocalFastEmbed(sys.argv[1])
    ).run(transport="streamable-http" if "--http" in sys.argv[2:] else "stdio")
