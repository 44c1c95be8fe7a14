"""What a collection (and chunking) needs of an encoder, and of a re-ranker: any object with these members works,
none has to subclass SentenceEncoder (an adapter over LangChain embeddings, a remote model, a test double)."""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, Protocol, runtime_checkable

#: Set by a caller that encodes one request in several calls (a collection's write): an encoder that cuts texts to
#: its token limit adds their number here instead of warning on each call, and the caller warns once.
truncated_tally: ContextVar[list[int] | None] = ContextVar("sbert_qdrant_truncated_tally", default=None)


@runtime_checkable
class TextEncoder(Protocol):
    """Encodes stored texts and search queries into vectors of one size (``upsert_texts``, ``search_text``)."""

    @property
    def dimension(self) -> int:
        """The size of every vector."""

    @property
    def normalizes(self) -> bool:
        """Whether every vector has unit length."""

    def encode_document(
        self, texts: Sequence[str], batch_size: int = ..., *, show_progress_bar: bool | None = ...
    ) -> Any:
        """Vectors of texts as stored: an array of shape (len(texts), dimension)."""

    def encode_query(self, texts: Sequence[str], batch_size: int = ..., *, show_progress_bar: bool | None = ...) -> Any:
        """Vectors of search queries: an array of shape (len(texts), dimension)."""


@runtime_checkable
class DocumentEncoder(TextEncoder, Protocol):
    """A TextEncoder with a tokenizer, so that long documents are cut into chunks it reads whole
    (``upsert_documents``)."""

    @property
    def document_token_limit(self) -> int:
        """Tokens of a text that ``encode_document`` reads whole."""

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans (start, end) of the tokens of ``text``, without special tokens."""


@runtime_checkable
class TokenEncoder(Protocol):
    """Encodes texts into one vector per token, for a multivector slot compared by MaxSim (late interaction):
    ``encode_document`` / ``encode_query`` give one (tokens, dimension) array per text."""

    @property
    def multivector(self) -> bool:
        """True: what tells a token encoder from a ``TextEncoder`` (their methods share names)."""

    @property
    def dimension(self) -> int:
        """The size of every token vector."""

    @property
    def normalizes(self) -> bool:
        """Whether every token vector has unit length."""

    def encode_document(
        self, texts: Sequence[str], batch_size: int = ..., *, show_progress_bar: bool | None = ...
    ) -> list[Any]: ...

    def encode_query(
        self, texts: Sequence[str], batch_size: int = ..., *, show_progress_bar: bool | None = ...
    ) -> list[Any]: ...


@runtime_checkable
class Reranker(Protocol):
    """Re-scores (query, text) pairs read together, one relevance score each (``rerank=``): a CrossEncoder with one
    output, or any object with these members (a remote re-ranking service, a test double)."""

    @property
    def num_labels(self) -> int:
        """1: one relevance score per pair."""

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = ...) -> Any:
        """One score per pair, higher is more relevant: an array of shape (len(pairs),) or (len(pairs), 1)."""


def identity_of(encoder: object) -> str | None:
    """An encoder's ``identity`` (``name@fingerprint``, see SentenceEncoder.identity), None when it has none."""
    identity = getattr(encoder, "identity", None)
    return identity if isinstance(identity, str) and identity else None


def same_encoder(left: str, right: str) -> bool:
    """Whether two identities name the same encoder (the fingerprints match; names may differ). An identity recorded
    before the modules' settings joined it (no ``-modules`` part) is compared on weights and prompt only."""
    ours, theirs = left.rpartition("@")[2], right.rpartition("@")[2]
    if "-" in ours and "-" in theirs:
        return ours == theirs
    return ours.partition("-")[0] == theirs.partition("-")[0]
