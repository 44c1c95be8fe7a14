"""SentenceEncoder.encode on a tiny random BERT: shapes, order, errors, truncation, precisions."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from sbert_qdrant import InvalidArgumentError, InvalidInputError, SentenceEncoder

TEXTS = ["a short one", "a considerably longer sentence with many more words in it", "mid length text", "x"]


def test_encode_returns_float32_rows_in_input_order(tiny_encoder: SentenceEncoder) -> None:
    batched = tiny_encoder.encode(TEXTS, batch_size=2)
    assert isinstance(batched, np.ndarray) and batched.dtype == np.float32
    assert batched.shape == (4, tiny_encoder.dimension)
    one_by_one = np.stack([tiny_encoder.encode(t) for t in TEXTS])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)


def test_empty_list_gives_empty_matrix(tiny_encoder: SentenceEncoder) -> None:
    assert tiny_encoder.encode([]).shape == (0, tiny_encoder.dimension)


@pytest.mark.parametrize(("texts", "index"), [(["ok", None], 1), ([3, "ok"], 0), (["a", "b", b"bytes"], 2)])
def test_non_string_item_is_named_by_index(tiny_encoder: SentenceEncoder, texts: list, index: int) -> None:
    with pytest.raises(InvalidInputError, match=rf"texts\[{index}\]"):
        tiny_encoder.encode(texts)


@pytest.mark.parametrize("texts", [None, 42, b"bytes"])
def test_non_sequence_texts_are_refused(tiny_encoder: SentenceEncoder, texts: object) -> None:
    with pytest.raises(InvalidInputError, match="texts must be"):
        tiny_encoder.encode(texts)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"batch_size": True}, {"convert_to": "list"}])
def test_bad_encode_arguments_are_refused(tiny_encoder: SentenceEncoder, kwargs: dict) -> None:
    with pytest.raises(InvalidArgumentError):
        tiny_encoder.encode(["a"], **kwargs)


def test_truncation_is_counted_and_warned(tiny_encoder: SentenceEncoder, caplog: pytest.LogCaptureFixture) -> None:
    tiny_encoder.max_seq_length = 8
    long_text = "word " * 50
    with caplog.at_level(logging.WARNING, logger="sbert_qdrant"):
        vectors = tiny_encoder.encode([long_text, "short", long_text])
    assert tiny_encoder.truncated_count == 2
    assert "2 of 3 texts were longer than max_seq_length=8" in caplog.text
    # a text exactly at the limit is not counted as cut: [CLS] + 6 tokens + [SEP] = 8
    tiny_encoder.encode(["one two three four five six"])
    assert tiny_encoder.truncated_count == 2
    # the truncated text equals its first 6 word pieces
    np.testing.assert_allclose(vectors[0], tiny_encoder.encode("word word word word word word"), atol=1e-5)


def test_normalize_switches(tiny_encoder: SentenceEncoder) -> None:
    raw = tiny_encoder.encode(TEXTS, normalize=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), tiny_encoder.encode(TEXTS), atol=1e-5)
    assert tiny_encoder.normalizes


def test_convert_to_torch(tiny_encoder: SentenceEncoder) -> None:
    out = tiny_encoder.encode(TEXTS, convert_to="torch")
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.device.type == "cpu"


def test_max_seq_length_bounds(tiny_encoder: SentenceEncoder) -> None:
    with pytest.raises(InvalidArgumentError, match="max_seq_length=1000"):
        tiny_encoder.max_seq_length = 1000


@pytest.mark.parametrize(("precision", "tolerance"), [("bf16", 0.98), ("int8", 0.95)])
def test_reduced_precisions_stay_close_to_fp32(precision: str, tolerance: float) -> None:
    from conftest import tiny_transformer

    from sbert_qdrant import Normalize, Pooling

    def build(p: str) -> SentenceEncoder:
        t = tiny_transformer(seed=3)
        return SentenceEncoder([t, Pooling(t.dimension), Normalize()], device="cpu", precision=p)  # type: ignore[arg-type]

    exact = build("fp32").encode(TEXTS)
    reduced = build(precision).encode(TEXTS)
    assert reduced.dtype == np.float32
    assert (exact * reduced).sum(axis=1).min() > tolerance


def test_int8_quantizes_all_but_the_first_layer(tiny_encoder: SentenceEncoder) -> None:
    from sbert_qdrant.encoder.int8.quantize import int8_layer_names

    names = int8_layer_names(tiny_encoder.transformer.model)
    assert names and not any(".layer.0." in n for n in names)
    assert any(".layer.1." in n for n in names)


@pytest.mark.parametrize(
    ("precision", "device", "message"),
    [("fp64", "cpu", "not one of"), ("fp16", "cpu", "needs a CUDA"), ("int8", "cuda", "CUDA")],
)
def test_unusable_precision_or_device_is_refused(precision: str, device: str, message: str) -> None:
    if device == "cuda" and torch.cuda.is_available():
        message = "cannot run on cuda"
    with pytest.raises(InvalidArgumentError, match=message):
        SentenceEncoder.load(device=device, precision=precision)  # type: ignore[arg-type]


def test_unknown_device_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="device='quantum'"):
        SentenceEncoder.load(device="quantum")


def test_int8_encoder_cannot_be_saved(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from conftest import tiny_transformer

    from sbert_qdrant import Pooling

    t = tiny_transformer()
    encoder = SentenceEncoder([t, Pooling(t.dimension)], device="cpu", precision="int8")
    with pytest.raises(InvalidArgumentError, match="int8"):
        encoder.save(tmp_path / "x")


def test_max_seq_length_reads_and_sets_the_transformers_limit_and_is_a_descriptor_on_the_class(
    tiny_encoder: SentenceEncoder,
) -> None:
    from sbert_qdrant import CrossEncoder
    from sbert_qdrant.encoder.transformer import TokenLimit

    assert isinstance(SentenceEncoder.max_seq_length, TokenLimit)
    assert isinstance(CrossEncoder.max_seq_length, TokenLimit)
    tiny_encoder.max_seq_length = 16
    assert tiny_encoder.max_seq_length == tiny_encoder.transformer.max_seq_length == 16
