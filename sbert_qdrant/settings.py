"""Settings from the environment (pydantic-settings); secrets stay out of reprs and logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .types import NativeKernels, Precision


def default_cache() -> Path:
    """``~/.cache/sbert-qdrant``."""
    return Path.home() / ".cache" / "sbert-qdrant"


def redact_url(url: str) -> str:
    """The URL with any ``user:password@`` replaced by ``***@``."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class Settings(BaseSettings):
    """``QDRANT_URL``, ``QDRANT_API_KEY`` and ``SBERT_QDRANT_*`` variables (a ``.env`` file is read too)."""

    model_config = SettingsConfigDict(env_prefix="SBERT_QDRANT_", env_file=".env", extra="ignore")

    qdrant_url: str | None = Field(
        default=None, validation_alias=AliasChoices("QDRANT_URL", "SBERT_QDRANT_URL"), repr=False
    )
    qdrant_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("QDRANT_API_KEY", "SBERT_QDRANT_API_KEY")
    )
    location: str = Field(default="./sbert_qdrant_data", description="folder of embedded Qdrant Edge collections")
    collection: str = "texts"
    model: str | None = None
    device: str | None = None
    precision: Precision = "auto"
    truncate_dim: int | None = Field(
        default=None, description="the default encoder's vectors cut to their first N values (Matryoshka models)"
    )
    timeout: float = Field(default=30.0, gt=0, description="seconds per request to a Qdrant server")
    retry_attempts: int = Field(default=6, ge=1)
    retry_max_seconds: float = Field(default=60.0, gt=0)
    cache: Path = Field(
        default_factory=default_cache, description="folder of int8 calibrations and the native kernels' library"
    )
    native: NativeKernels = Field(
        default="auto", description="'off': static int8 never builds or loads its native kernels (PyTorch's paths)"
    )

    @field_validator("cache", mode="before")
    @classmethod
    def _expand_cache(cls, value: object) -> object:
        if value in ("", None):  # an empty variable means the default, as unset
            return default_cache()
        return Path(str(value)).expanduser()

    @property
    def safe_url(self) -> str | None:
        """``qdrant_url`` without credentials, for logs and messages."""
        return None if self.qdrant_url is None else redact_url(self.qdrant_url)

    def __repr_args__(self) -> Any:
        yield "qdrant_url", self.safe_url
        yield from super().__repr_args__()
