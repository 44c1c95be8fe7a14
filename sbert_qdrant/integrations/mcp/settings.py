"""The MCP server's settings: mcp-server-qdrant's environment names where they mean the same, and ``SBERT_QDRANT_*``."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from ...settings import Settings
from .filterable import FilterableField

ResultFormat = Literal["mcp-server-qdrant", "sbert-qdrant"]

DEFAULT_FIND_DESCRIPTION = (
    "Look up memories in Qdrant by meaning. Use this tool when you need to: \n"
    " - Find memories by their content \n"
    " - Access memories for further analysis \n"
    " - Get some personal information about the user"
)
DEFAULT_STORE_DESCRIPTION = "Keep the memory for later use, when you are asked to remember something."


class McpSettings(Settings):
    """``Settings`` plus the server's own: ``COLLECTION_NAME``, ``QDRANT_LOCAL_PATH``, ``QDRANT_SEARCH_LIMIT``,
    ``QDRANT_READ_ONLY``, ``EMBEDDING_MODEL``, ``TOOL_FIND_DESCRIPTION``, ``TOOL_STORE_DESCRIPTION``,
    ``FILTERABLE_FIELDS``, ``QDRANT_ALLOW_ARBITRARY_FILTER``, ``FASTMCP_HOST`` / ``_PORT`` / ``_LOG_LEVEL`` and
    ``FASTMCP_SERVER_HOST`` / ``_PORT`` / ``_LOG_LEVEL`` (as mcp-server-qdrant and the FastMCP it installs read them)
    and ``SBERT_QDRANT_*`` (each field's name in upper case); ``EMBEDDING_PROVIDER`` is read to say it is not used."""

    #: No ``.env`` is read unless asked for (``McpSettings(_env_file=path)``, ``--env-file``), as mcp-server-qdrant
    #: reads none: an agent app starts the server in whatever folder, whose ``.env`` is some project's.
    model_config = SettingsConfigDict(env_prefix="SBERT_QDRANT_", env_file=None, extra="ignore", populate_by_name=True)

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
    filterable_fields: list[FilterableField] = Field(
        default_factory=list,
        validation_alias=AliasChoices("FILTERABLE_FIELDS", "SBERT_QDRANT_FILTERABLE_FIELDS"),
        description="metadata fields indexed, and those with a condition offered as qdrant-find arguments",
    )
    allow_arbitrary_filter: bool | None = Field(
        default=None,
        validation_alias=AliasChoices("QDRANT_ALLOW_ARBITRARY_FILTER", "SBERT_QDRANT_ALLOW_ARBITRARY_FILTER"),
        description="offer the query_filter argument (None: unless FILTERABLE_FIELDS gives arguments)",
    )
    embedding_provider: str | None = Field(
        default=None,
        validation_alias=AliasChoices("EMBEDDING_PROVIDER", "SBERT_QDRANT_EMBEDDING_PROVIDER"),
        description="mcp-server-qdrant's embedding provider: this server embeds with its own model (EMBEDDING_MODEL), "
        "and says so at start where another than fastembed is named",
    )
    # FastMCP 2 (what mcp-server-qdrant 0.8 installs) reads FASTMCP_SERVER_*, the SDK's FastMCP FASTMCP_*: both work
    host: str = Field(
        default="127.0.0.1",
        validation_alias=AliasChoices("FASTMCP_HOST", "FASTMCP_SERVER_HOST", "SBERT_QDRANT_HOST"),
    )
    port: int = Field(
        default=8000,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("FASTMCP_PORT", "FASTMCP_SERVER_PORT", "SBERT_QDRANT_PORT"),
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        default="INFO",
        validation_alias=AliasChoices("FASTMCP_LOG_LEVEL", "FASTMCP_SERVER_LOG_LEVEL", "SBERT_QDRANT_LOG_LEVEL"),
    )
    mcp_token: SecretStr | None = Field(
        default=None,
        description="the bearer token every HTTP request (SSE, streamable HTTP) must carry: 'Authorization: Bearer "
        "<token>' (None: none asked, and the server serves loopback only)",
    )
    mcp_read_token: SecretStr | None = Field(
        default=None,
        description="a bearer token whose holder may use the tools that read (find, count, list) and not those that "
        "write (store, delete): refused with a tool error; beside mcp_token or alone",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names (or addresses) clients may reach an HTTP server by, beside loopback and this "
        "machine's names (a JSON list)",
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
    layout: Literal["sbert-qdrant", "mcp-server-qdrant"] | None = Field(
        default=None,
        description="the layout of a collection this server creates (None: mcp-server-qdrant's on the engines it "
        "reads, QDRANT_URL and QDRANT_LOCAL_PATH; sbert-qdrant's, with BM25 and documents, on Qdrant Edge)",
    )
    result_format: ResultFormat | None = Field(
        default=None,
        description="the text of qdrant-find's answer: mcp-server-qdrant's JSON array of <entry> strings, or ours, "
        "<entry> lines with ids and scores (None: theirs where new collections take their layout, else ours)",
    )
    encode_threads: int | None = Field(
        default=1,
        ge=1,
        description="torch threads of each worker thread that encodes (None: torch's default); an agent's query is "
        "one short text, which one thread encodes without contending with the engine's threads",
    )
    rerank_model: str | None = Field(default=None, description="a cross-encoder folder or hub id for rerank=true")
    rerank_weight: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="the cross-encoder's weight for rerank=true: 1 orders by it alone, less blends its score with "
        "the search's (each min-max scaled over the candidates)",
    )
    preload: bool = Field(default=True, description="load the model in the background as the server starts")
    max_document_chars: int = Field(
        default=500_000, ge=1, description="the longest document qdrant-store-document takes"
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_engine(self) -> McpSettings:
        if self.local_path and self.qdrant_url:
            raise ValueError(
                f"QDRANT_LOCAL_PATH={self.local_path!r} and QDRANT_URL={self.safe_url!r} are both set; set one "
                "(a local-mode folder, or a Qdrant server)."
            )
        for name, token in (
            ("SBERT_QDRANT_MCP_TOKEN", self.mcp_token),
            ("SBERT_QDRANT_MCP_READ_TOKEN", self.mcp_read_token),
        ):
            if token is not None and not token.get_secret_value().strip():
                raise ValueError(f"{name} is set but empty; set it to a secret, or unset it.")
        if self.mcp_token is not None and self.mcp_token == self.mcp_read_token:
            raise ValueError(
                "SBERT_QDRANT_MCP_READ_TOKEN equals SBERT_QDRANT_MCP_TOKEN, so its holder could write; give the "
                "read-only token another secret."
            )
        names = [f.name for f in self.filterable_fields]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"FILTERABLE_FIELDS names {repeated} more than once; keep one entry per field.")
        return self

    @property
    def not_used(self) -> list[str]:
        """One line per setting given that this server does not use (and mcp-server-qdrant would), said at start."""
        notes = []
        if self.embedding_provider is not None and self.embedding_provider.lower() != "fastembed":
            notes.append(
                f"EMBEDDING_PROVIDER={self.embedding_provider!r} is not used: this server embeds with its own model "
                f"({self.model or 'the default'}; EMBEDDING_MODEL names another), never with a provider's API."
            )
        if self.local_path and self.qdrant_api_key is not None:
            notes.append(
                f"QDRANT_API_KEY is not used: QDRANT_LOCAL_PATH={self.local_path!r} is a local folder, which takes no "
                "key (mcp-server-qdrant refuses the two together); unset QDRANT_API_KEY, or use QDRANT_URL."
            )
        return notes

    @property
    def token_asked(self) -> bool:
        """Whether every HTTP request must carry a token (either one)."""
        return self.mcp_token is not None or self.mcp_read_token is not None

    @property
    def field_arguments(self) -> dict[str, FilterableField]:
        """The filterable fields offered as tool arguments (those with a condition), by name."""
        return {f.name: f for f in self.filterable_fields if f.condition is not None}

    @property
    def new_in_their_layout(self) -> bool:
        """Whether a collection this server creates is in mcp-server-qdrant's layout (``layout``, see there)."""
        if self.layout is not None:
            return self.layout == "mcp-server-qdrant"
        return bool(self.local_path or self.qdrant_url)

    @property
    def results(self) -> ResultFormat:
        """The format of a find's text (``result_format``, see there)."""
        if self.result_format is not None:
            return self.result_format
        return "mcp-server-qdrant" if self.new_in_their_layout else "sbert-qdrant"

    @property
    def query_filter_offered(self) -> bool:
        """Whether the finds take ``query_filter``: as set, else unless the fields give arguments."""
        if self.allow_arbitrary_filter is not None:
            return self.allow_arbitrary_filter
        return not self.field_arguments
