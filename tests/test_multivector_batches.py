"""A write into a collection with a multivector slot is cut by bytes, not by a batch count: each write batch holds
at most ``MULTIVECTOR_BATCH_BYTES`` of token vectors at the token encoders' limits, and every point is written."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from sbert_qdrant import MultiVectorEncoder, TextCollection, testing
from sbert_qdrant._collection import vectors
from sbert_qdrant.encoder.layers import Dense


class _Counting:
    """A token encoder that records how many texts each write asked it to encode."""

    multivector = True

    def __init__(self, inner: MultiVectorEncoder) -> None:
        self.inner, self.calls = inner, []
        self.transformer = inner.transformer

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def normalizes(self) -> bool:
        return self.inner.normalizes

    @property
    def identity(self) -> str:
        return self.inner.identity

    def encode_document(
        self, texts: Sequence[str], batch_size: int = 32, *, show_progress_bar: bool | None = None
    ) -> list[np.ndarray]:
        self.calls.append(len(texts))
        return self.inner.encode_document(texts, batch_size)

    def encode_query(
        self, texts: Sequence[str], batch_size: int = 32, *, show_progress_bar: bool | None = None
    ) -> list[np.ndarray]:
        return self.inner.encode_query(texts, batch_size)


def _tokens() -> _Counting:
    transformer = testing.tiny_transformer(max_seq_length=32)
    return _Counting(MultiVectorEncoder(transformer, Dense(transformer.dimension, 16, bias=False), name="tiny"))


@pytest.mark.parametrize("documents", [False, True])
def test_a_batch_of_long_texts_is_split_by_bytes_and_every_point_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, documents: bool
) -> None:
    per_text = 32 * 16 * 4  # the tiny slot's token limit x dimension x float32
    monkeypatch.setattr(vectors, "MULTIVECTOR_BATCH_BYTES", 13 * per_text)  # a document's chunks stay together
    tokens = _tokens()
    texts = [" ".join(f"word{i}x{j}" for j in range(40)) for i in range(23)]  # each past the 32-token limit
    with TextCollection("long", testing.tiny_encoder(), location=tmp_path, named_vectors={"tokens": tokens}) as coll:
        if documents:
            coll.upsert_documents(texts, ids=list(range(23)), batch_size=1000)
            assert all(coll.get_document(i) is not None for i in range(23))
        else:
            coll.upsert_texts(texts, ids=list(range(23)), batch_size=1000)
            assert len(coll.get(list(range(23)))) == 23
        assert max(tokens.calls) <= 13 and len(tokens.calls) > 1  # cut by bytes, not the 1,000 asked for
        found = coll.search_documents if documents else coll.search_text
        assert found("word3x1 word3x2", limit=3, rescore="tokens")
