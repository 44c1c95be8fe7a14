"""The MCP server's settings: mcp-server-qdrant's environment names where they mean the same, and ``SBERT_QDRANT_*``."""

from __future__ import annotations

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import SettingsConfigDict

from ...settings import Settings

DEFAULT_FIND_DESCRIPTION = (
    "Look up memories in Qdrant by meaning. Use this tool when you need to: \n"
    " - Find memories by their content \n"
    " - Access memories for further analysis \n"
    " - Get some personal information about the user"
)
DEFAULT_STORE_DESCRIPTION = "Keep the memory for later use, when you are asked to remember something."


class McpSettings(Settings):
    """``Settings`` plus the server's own: ``COLLECTION_NAME``, ``QDRANT_LOCAL_PATH``, ``QDRANT_SEARCH_LIMIT``,
    ``QDRANT_READ_ONLY``, ``EMBEDDING_MODEL``, ``TOOL_FIND_DESCRIPTION``, ``TOOL_STORE_DESCRIPTION`` (as
    mcp-server-qdrant reads them) and ``SBERT_QDRANT_*`` (each field's name in upper case)."""

    model_config = SettingsConfigDict(
        env_prefix="SBERT_QDRANT_", env_file=".env", extra="ignore", populate_by_name=True
    )

    model: str | None = Field(default=None, validation_alias=AliasChoices("SBERT_QDRANT_MODEL", "EMBEDDING_MODEL"))
    collection_name: str | None = Field(
        default=None,
        validation_alias=AliasChoices("COLLECTION_NAME", "SBERT_QDRANT_COLLECTION_NAME"),
        description="the one collection every tool uses (their collection_name argument is then left out)",
    )
    local_path: str | None = Field(
        default=None,
        validation_alias=AliasChoices("QDRANT_LOCAL_PATH", "SBERT_QDRANT_LOCAL_PATH"),
        description="folder of a qdrant-client local-mode store (mcp-server-qdrant's), instead of Qdrant Edge",
    )
    search_limit: int = Field(
        default=10, ge=1, validation_alias=AliasChoices("QDRANT_SEARCH_LIMIT", "SBERT_QDRANT_SEARCH_LIMIT")
    )
    read_only: bool = Field(
        default=False,
        validation_alias=AliasChoices("QDRANT_READ_ONLY", "SBERT_QDRANT_READ_ONLY"),
        description="register the reading tools only",
    )
    tool_find_description: str = Field(
        default=DEFAULT_FIND_DESCRIPTION,
        validation_alias=AliasChoices("TOOL_FIND_DESCRIPTION", "SBERT_QDRANT_TOOL_FIND_DESCRIPTION"),
    )
    tool_store_description: str = Field(
        default=DEFAULT_STORE_DESCRIPTION,
        validation_alias=AliasChoices("TOOL_STORE_DESCRIPTION", "SBERT_QDRANT_TOOL_STORE_DESCRIPTION"),
    )
    vector_name: str | None = Field(
        default=None,
        description="the dense vector's name in existing collections (None: 'text', or mcp-server-qdrant's "
        "'fast-<model>' where a collection has that one)",
    )
    text_field: str | None = Field(
        default=None,
        description="the payload field of the text in existing collections written by another tool (read-only)",
    )
    rerank_model: str | None = Field(default=None, description="a cross-encoder folder or hub id for rerank=true")
    preload: bool = Field(default=True, description="load the model in the background as the server starts")
    max_document_chars: int = Field(
        default=500_000, ge=1, description="the longest document qdrant-store-document takes"
    )

    @model_validator(mode="after")
    def _one_engine(self) -> McpSettings:
        if self.local_path and self.qdrant_url:
            raise ValueError(
                f"QDRANT_LOCAL_PATH={self.local_path!r} and QDRANT_URL={self.safe_url!r} are both set; set one "
                "(a local-mode folder, or a Qdrant server)."
            )
        return self
