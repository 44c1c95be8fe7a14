"""The host path's shortcuts (issue 62) give exactly what the plain code gives: ids without ``UUID`` objects, given
vectors checked as one matrix, token rows as arrays (and the one-token-over cut, or its fall-back), the collector's
pause."""

from __future__ import annotations

import gc
import threading
import uuid

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sbert_qdrant._allocation import gc_paused
from sbert_qdrant.encoder.tokens import TokenizerSpec, TokenRows, token_rows
from sbert_qdrant.errors import InvalidInputError
from sbert_qdrant.records import ID_NAMESPACE, VectorShape, point_id, text_id
from sbert_qdrant.testing import tiny_encoder


@given(st.text(max_size=60))
def test_text_ids_are_uuid5_of_the_text(text: str) -> None:
    try:
        expected = str(uuid.uuid5(ID_NAMESPACE, "text:" + text))
    except UnicodeEncodeError:  # a lone surrogate: refused alike
        with pytest.raises(UnicodeEncodeError):
            text_id(text)
        return
    assert text_id(text) == expected


@given(st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.text(max_size=40), st.uuids().map(str)))
def test_point_ids_are_a_canonical_uuid_as_it_is_else_its_uuid5(key: int | str) -> None:
    try:
        canonical = isinstance(key, str) and str(uuid.UUID(key)) == key
    except ValueError:
        canonical = False
    try:
        expected = key if canonical else str(uuid.uuid5(ID_NAMESPACE, f"{type(key).__name__}:{key}"))
    except UnicodeEncodeError:
        return
    assert point_id(key) == expected


def test_other_spellings_of_a_uuid_are_other_points() -> None:
    u = str(uuid.UUID(int=0xABCDEF0123456789ABCDEF))
    assert point_id(u) == u
    assert len({point_id(v) for v in (u, u.upper(), u.replace("-", ""), "{" + u + "}", u + "\n")}) == 5


def test_vectors_checked_as_a_matrix_are_the_rows_and_the_first_bad_row_is_named() -> None:
    shape = VectorShape(4, unit=True)
    rows = np.eye(4, dtype=np.float32)
    checked = shape.check_each(list(rows), [10, 11, 12, 13])
    assert all(np.array_equal(a, b) for a, b in zip(checked, rows, strict=True))
    bad = [rows[0], rows[1] * 2, np.array([np.nan, 0, 0, 1], np.float32), rows[3]]
    with pytest.raises(InvalidInputError, match=r"vectors\[11\] has length 2"):
        shape.check_each(bad, [10, 11, 12, 13])
    with pytest.raises(InvalidInputError, match=r"vectors\[12\] has shape \(3,\)"):
        shape.check_each([rows[0], rows[1], rows[2][:3]], [10, 11, 12])  # ragged: no matrix, row by row
    assert [v.tolist() for v in VectorShape(4, unit=False).check_each([[1, 2, 3, 4]], [0])] == [[1, 2, 3, 4]]


def test_token_rows_gather_and_pad_as_lists_would() -> None:
    lists = [[101, 7, 102], [101, 102], [101, 5, 6, 7, 102]]
    rows = TokenRows.from_lists(lists)
    assert rows.tolist() == lists and rows.lengths.tolist() == [3, 2, 5]
    ids, lengths = rows.gather(np.array([2, 0]))
    assert ids.tolist() == [101, 5, 6, 7, 102, 101, 7, 102] and lengths.tolist() == [5, 3]
    padded, mask = rows.padded(np.array([1, 0]), pad_id=0)
    assert padded.tolist() == [[101, 102, 0], [101, 7, 102]] and mask.tolist() == [[1, 1, 0], [1, 1, 1]]


@pytest.mark.parametrize("verified", [True, False])
def test_a_text_over_the_limit_is_cut_as_a_call_at_the_limit_cuts_it(verified: bool) -> None:
    transformer = tiny_encoder().transformer  # max_seq_length 32
    spec = transformer.token_spec()
    assert spec is not None and spec.trailing == 1  # [SEP]: checked on a text over the limit
    if not verified:  # the fall-back: the texts over the limit tokenized again at the limit
        spec = TokenizerSpec(spec.tokenizer_json, spec.limit, spec.lower, spec.words_alone, None)
    texts = ["short one", "word " * 31, "word " * 30, "a much longer text " * 20]
    rows, cut = token_rows(spec.build(), spec, texts)
    plain = transformer.tokenizer(texts, truncation=True, max_length=32, return_attention_mask=False)["input_ids"]
    assert rows.tolist() == plain and cut == 2


def test_the_collector_pause_nests_across_threads_and_restores_what_it_found() -> None:
    assert gc.isenabled()
    inside = threading.Event()
    leave = threading.Event()

    def other() -> None:
        with gc_paused():
            inside.set()
            leave.wait(5)

    worker = threading.Thread(target=other)
    with gc_paused():
        worker.start()
        inside.wait(5)
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread is still inside
    leave.set()
    worker.join()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: left off
    finally:
        gc.enable()
