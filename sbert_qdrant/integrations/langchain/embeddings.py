"""LangChain ``Embeddings`` over a SentenceEncoder, and any LangChain ``Embeddings`` as a collection's encoder."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from langchain_core.embeddings import Embeddings

from ...encoder import LoadOptions, SentenceEncoder
from ...errors import InvalidArgumentError, InvalidInputError
from ...protocols import TextEncoder
from .._encoder import given_or_loaded

if TYPE_CHECKING:
    from typing_extensions import Unpack


class SbertEmbeddings(Embeddings):
    """A SentenceEncoder as LangChain ``Embeddings``: documents with the model's document prompt, queries with its
    query prompt (when the model has them), encoded in length-sorted batches.

    model: a folder, a hub id or None for ``SBERT_QDRANT_MODEL`` if set, else the default model (all-MiniLM-L6-v2),
    loaded with the load options ``device=``, ``precision=``, ``truncate_dim=`` (``LoadOptions``; each else its
    ``SBERT_QDRANT_*`` setting, as ``load_encoder``); or pass an ``encoder`` you already loaded (shared, not copied),
    as ``encoder=`` or first (``SbertEmbeddings(encoder)``).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | SentenceEncoder | None = None,
        *,
        encoder: SentenceEncoder | None = None,
        batch_size: int = 32,
        normalize: bool | None = None,
        show_progress_bar: bool = False,
        **load: Unpack[LoadOptions],
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size={batch_size!r} must be a positive integer.")
        self.encoder, loaded = given_or_loaded(encoder, model, **load)
        #: The model loaded (None: given as ``encoder``, or the default model).
        self.model_name = None if loaded is None else str(loaded)
        self.batch_size = batch_size
        self.normalize = normalize
        self.show_progress_bar = show_progress_bar

    def __repr__(self) -> str:
        return f"SbertEmbeddings({self.encoder!r}, batch_size={self.batch_size})"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, as stored for search."""
        vectors = self.encoder.encode_document(
            texts, batch_size=self.batch_size, normalize=self.normalize, show_progress_bar=self.show_progress_bar
        )
        return np.asarray(vectors, dtype=np.float32).tolist()

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query."""
        if not isinstance(text, str):
            raise InvalidInputError(f"text is {type(text).__name__} ({text!r:.60}), not str; pass the query text.")
        vector = self.encoder.encode_query([text], batch_size=1, normalize=self.normalize, show_progress_bar=False)
        return np.asarray(vector, dtype=np.float32)[0].tolist()

    # aembed_documents / aembed_query: LangChain's defaults run the two above in a worker thread, off the event loop.


class LangChainEncoder:
    """Any LangChain ``Embeddings`` as the encoder of a TextCollection, which then stores and searches its vectors
    (``TextCollection(name, encoder=LangChainEncoder(OpenAIEmbeddings()))``).

    dimension: the vector size; None asks the embeddings once (``embed_query``) when it is first needed.
    It has no tokenizer, so document methods (``upsert_documents``) refuse it.
    """

    def __init__(self, embeddings: Embeddings, dimension: int | None = None) -> None:
        if not isinstance(embeddings, Embeddings):
            raise InvalidArgumentError(f"embeddings must be a LangChain Embeddings, not {type(embeddings).__name__}.")
        if dimension is not None and (isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1):
            raise InvalidArgumentError(f"dimension={dimension!r} must be a positive integer, or None to ask.")
        self.embeddings = embeddings
        self._dimension = dimension

    def __repr__(self) -> str:
        return f"LangChainEncoder({self.embeddings!r}, dimension={self._dimension})"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self.embeddings.embed_query("dimension"))
        return self._dimension

    @property
    def normalizes(self) -> bool:
        return False  # unknown; cosine collections normalise in the engine anyway

    def encode(
        self, texts: str | Sequence[str], batch_size: int = 32, *, kind: str = "document", **options: Any
    ) -> np.ndarray | torch.Tensor:
        """Documents' vectors (``embed_documents``; ``kind="query"``: ``embed_query``, one call per query). Of
        ``SentenceEncoder.encode``'s options ``normalize`` and ``convert_to`` apply; the rest are the Embeddings'."""
        return self._encode(texts, kind, options.get("normalize"), options.get("convert_to", "numpy"))

    encode_document = encode
    encode_query = functools.partialmethod(encode, kind="query")

    def _encode(
        self, texts: str | Sequence[str], kind: str, normalize: bool | None, convert_to: str
    ) -> np.ndarray | torch.Tensor:
        single = isinstance(texts, str)
        items = [texts] if isinstance(texts, str) else list(texts)
        method = "embed_query" if kind == "query" else "embed_documents"
        if kind == "query":
            rows = [self.embeddings.embed_query(text) for text in items]
        else:
            rows = self.embeddings.embed_documents(items) if items else []
        out = np.asarray(rows, dtype=np.float32).reshape(len(items), -1) if rows else np.empty((0, self.dimension))
        if out.shape[1] != self.dimension or len(out) != len(items):
            raise InvalidInputError(
                f"{type(self.embeddings).__name__}.{method} gave {out.shape[0]} vectors of {out.shape[1]} "
                f"values for {len(items)} texts; expected {self.dimension} values each (pass dimension= if the "
                "model's size differs from what its first answer said)."
            )
        if normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        result = out.astype(np.float32)[0] if single else out.astype(np.float32)
        return torch.from_numpy(result) if convert_to == "torch" else result


def as_encoder(embedding: Embeddings | TextEncoder) -> TextEncoder:
    """The encoder a collection should use for ``embedding``: an SbertEmbeddings' own encoder (with its prompts and
    batching), an encoder as it is, any other Embeddings wrapped in a LangChainEncoder."""
    if isinstance(embedding, TextEncoder):
        return embedding
    if isinstance(embedding, SbertEmbeddings):
        return embedding.encoder
    return LangChainEncoder(embedding)
