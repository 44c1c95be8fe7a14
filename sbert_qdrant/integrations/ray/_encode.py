"""The callable classes ``Dataset.map_batches`` runs in its actors: each loads the encoder once and adds the vectors.

A row whose text cannot be encoded (not a str, blank) gets a zero vector instead of failing the actor: Ray Data
would wrap the error in its own, so the driver checks every row and stops the run with an error naming it. Rows
stored before the run never reach an actor (``_stored``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...encoder import EncoderSpec
from ...errors import InvalidArgumentError, InvalidInputError
from ...records import text_id

#: Columns the encoding adds: the dense vector (texts: one per row; documents: a (chunks, dimension) matrix per row),
#: and the identity of the encoder that made it.
VECTOR_COLUMN = "__sbert_vector"
ENCODER_COLUMN = "__sbert_encoder"
ADDED_COLUMNS = (VECTOR_COLUMN, ENCODER_COLUMN)

Batch = dict[str, np.ndarray]


@dataclass(frozen=True)
class Columns:
    """Where a dataset's rows keep their text, id (None: derived from the text) and payload fields (None: every
    other column)."""

    text: str = "text"
    id: str | None = None
    payload: tuple[str, ...] | None = None

    def check(self, names: Collection[str]) -> None:
        """Refuse column names the dataset does not have, before any work starts."""
        wanted = [self.text, *([self.id] if self.id is not None else []), *(self.payload or ())]
        missing = [name for name in wanted if name not in names]
        if missing:
            raise InvalidArgumentError(
                f"the dataset has no column(s) {missing} (columns: {sorted(names)}); pass text_column=, id_column= "
                "and payload_columns= naming its columns."
            )

    def payload_of(self, batch: Mapping[str, np.ndarray], row: int) -> dict[str, Any]:
        names = self.payload
        if names is None:
            names = tuple(n for n in batch if n not in (self.text, self.id, *ADDED_COLUMNS))
        return {name: _python(batch[name][row]) for name in names}

    def key(self, batch: Mapping[str, np.ndarray], row: int) -> Any:
        """The row's id as the collection will see it: its id column's value, else the id derived from its text."""
        if self.id is not None:
            return _python(batch[self.id][row])
        text = batch[self.text][row]
        return text_id(text) if isinstance(text, str) else None


def _python(value: Any) -> Any:
    """A numpy scalar or array as the plain Python value a payload or an id holds."""
    return value.tolist() if isinstance(value, (np.generic, np.ndarray)) else value


def _encodable(text: object) -> bool:
    return isinstance(text, str) and bool(text.strip())


class _Encode:
    """Shared by the text and document actors: the model loaded once (``max_seq_length``: the collection encoder's
    text length, where it has one)."""

    def __init__(
        self, spec: EncoderSpec | None, columns: Columns, encode_batch_size: int | None, max_seq_length: int | None
    ) -> None:
        length = {} if max_seq_length is None else {"max_seq_length": max_seq_length}
        self.encoder = (spec if spec is not None else EncoderSpec.of()).load(**length)
        self.identity = self.encoder.identity
        self.columns = columns
        self.encode_batch_size = encode_batch_size

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self.encoder.encode_document(texts, batch_size=self.encode_batch_size, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def _with(self, batch: Batch, vectors: np.ndarray) -> Batch:
        identity = np.full(len(vectors), self.identity, dtype=object)
        return {**batch, VECTOR_COLUMN: vectors, ENCODER_COLUMN: identity}


class EncodeTexts(_Encode):
    """``Dataset.map_batches(EncodeTexts, fn_constructor_kwargs={"spec": EncoderSpec.of()}, compute=...)``: each
    actor loads the encoder ``spec`` names once (None: ``EncoderSpec.of()`` in the actor's environment, as
    ``load_encoder`` reads it: ``SBERT_QDRANT_MODEL``/``_DEVICE``/``_PRECISION``/..., else the default model, the best
    device, "auto": fp16 on a GPU) and adds one dense vector per row (the text column encoded as the collection
    stores it) and the encoder's identity. ``encode_batch_size``: the most texts per encoder batch (None: the
    encoder's default, 32 on a CPU and the token budget alone on a GPU)."""

    def __init__(
        self,
        spec: EncoderSpec | None = None,
        *,
        columns: Columns = Columns(),
        encode_batch_size: int | None = None,
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__(spec, columns, encode_batch_size, max_seq_length)

    def __call__(self, batch: Batch) -> Batch:
        texts = batch[self.columns.text].tolist()
        todo = np.array([_encodable(t) for t in texts], dtype=bool)
        vectors = np.zeros((len(texts), self.encoder.dimension), dtype=np.float32)
        if todo.any():
            vectors[todo] = self._encode([t for t, ok in zip(texts, todo, strict=True) if ok])
        return self._with(batch, vectors)


class EncodeDocuments(_Encode):
    """``EncodeTexts`` for documents: each row's text cut into chunks as ``upsert_documents`` cuts it with the same
    ``chunk_tokens``, ``overlap_tokens`` and ``context_field``; the vector column holds a (chunks, dimension) matrix
    per row."""

    def __init__(
        self,
        spec: EncoderSpec | None = None,
        *,
        columns: Columns = Columns(),
        chunk_tokens: int | None = None,
        overlap_tokens: int | None = None,
        context_field: str | None = None,
        encode_batch_size: int | None = None,
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__(spec, columns, encode_batch_size, max_seq_length)
        from ...documents import Chunking  # here: the text actors never import documents (nor the Qdrant client)

        self.chunking = Chunking.of(self.encoder, chunk_tokens, overlap_tokens, context_field)

    def __call__(self, batch: Batch) -> Batch:
        inputs = [self._inputs(batch, row) for row in range(len(batch[self.columns.text]))]
        flat = [text for chunks in inputs for text in chunks]
        vectors = self._encode(flat) if flat else np.zeros((0, self.encoder.dimension), dtype=np.float32)
        bounds = np.cumsum([0, *map(len, inputs)])
        matrices = np.empty(len(inputs), dtype=object)
        for row in range(len(inputs)):
            matrices[row] = vectors[bounds[row] : bounds[row + 1]]
        return self._with(batch, matrices)

    def _inputs(self, batch: Batch, row: int) -> list[str]:
        """The chunk inputs of a row; none for a row the driver will refuse (its text or payload unusable)."""
        text = batch[self.columns.text][row]
        if not _encodable(text):
            return []
        try:
            return self.chunking.inputs(text, self.columns.payload_of(batch, row))
        except InvalidInputError:
            return []
