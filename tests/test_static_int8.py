"""Static int8 (issue 26): vectors track fp32 on real text with the default model, a reload reads the cached
calibration instead of calibrating again, and without VNNI (or a calibration) int8 falls back to dynamic, saying why."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from int8_support import held_out_texts, needs_static, nli_sentences

from sbert_qdrant import Normalize, Pooling, SentenceEncoder
from sbert_qdrant.encoder import native, static_int8
from sbert_qdrant.errors import InvalidArgumentError, InvalidInputError, SbertQdrantError


@pytest.mark.slow
@needs_static
def test_static_int8_vectors_track_fp32(static_encoder: SentenceEncoder, default_encoder: SentenceEncoder) -> None:
    texts = held_out_texts()
    assert static_encoder.quantization == "static"
    cosines = (np.asarray(static_encoder.encode(texts)) * np.asarray(default_encoder.encode(texts))).sum(axis=1)
    assert cosines.min() > 0.98, cosines.min()
    assert cosines.mean() > 0.995, cosines.mean()


@pytest.mark.slow
@needs_static
def test_reload_reads_the_cached_calibration(
    static_encoder: SentenceEncoder, cache: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_calibration(*_: object) -> None:
        raise AssertionError("a reload calibrated again")

    monkeypatch.setattr(static_int8, "calibrate", no_calibration)
    with caplog.at_level(logging.INFO, logger="sbert_qdrant.encoder.static_int8"):
        again = SentenceEncoder.load(device="cpu", precision="int8")
        same_texts = SentenceEncoder.load(device="cpu", precision="int8", calibration_texts=nli_sentences())
    assert "calibration read from" in caplog.text and str(cache) in caplog.text
    texts = held_out_texts()[:40]
    first = np.asarray(static_encoder.encode(texts))
    for reloaded in (again, same_texts):
        assert reloaded.quantization == "static"
        assert (np.asarray(reloaded.encode(texts)) * first).sum(axis=1).min() > 0.9999


def tiny_int8(**kwargs: object) -> SentenceEncoder:
    from conftest import tiny_transformer

    t = tiny_transformer(seed=3)
    return SentenceEncoder([t, Pooling(t.dimension), Normalize()], device="cpu", precision="int8", **kwargs)  # type: ignore[arg-type]


def test_cpu_without_vnni_falls_back_to_dynamic_saying_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    monkeypatch.setattr(static_int8, "static_int8_unsupported", lambda: "the CPU has no VNNI (simulated)")
    with caplog.at_level(logging.WARNING):
        encoder = tiny_int8(calibration_texts=nli_sentences())
    assert encoder.quantization == "dynamic"
    assert "runs dynamic int8: the CPU has no VNNI (simulated)" in caplog.text
    assert not any(tmp_path.rglob("*.safetensors"))  # nothing calibrated or written


@needs_static
def test_no_calibration_falls_back_to_dynamic_naming_the_fix(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    with caplog.at_level(logging.WARNING):
        encoder = tiny_int8()
    assert encoder.quantization == "dynamic"
    assert "calibration_texts=" in caplog.text


@pytest.mark.parametrize(
    ("precision", "texts", "error", "message"),
    [
        ("fp32", ["a text"], InvalidArgumentError, "need precision='int8'"),
        ("int8", [], InvalidArgumentError, "calibration_texts is empty"),
        ("int8", [3], InvalidInputError, "texts\\[0\\]"),
    ],
)
def test_bad_calibration_texts_are_refused(
    precision: str, texts: list[object], error: type[SbertQdrantError], message: str
) -> None:
    with pytest.raises(error, match=message):
        SentenceEncoder.load(device="cpu", precision=precision, calibration_texts=texts)  # type: ignore[arg-type]


@pytest.mark.slow
@needs_static
def test_cross_encoder_runs_static_int8_tracking_fp32(cache: Path) -> None:
    import copy

    from scipy.stats import pearsonr

    from sbert_qdrant import CrossEncoder

    exact = CrossEncoder.from_transformer(seed=0)
    sentences = nli_sentences()
    quantized = CrossEncoder(
        copy.deepcopy(exact.transformer),
        device="cpu",
        precision="int8",
        calibration_pairs=list(zip(sentences[:60], sentences[60:], strict=True)),
    )
    assert quantized.quantization == "static"
    texts = held_out_texts()
    pairs = list(zip(texts[:75], texts[75:150], strict=True))
    assert pearsonr(exact.predict(pairs), quantized.predict(pairs)).statistic > 0.95


@needs_static
def test_static_int8_runs_eagerly_without_a_compiler(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    import torch

    def no_compiler(*_: object, **__: object) -> object:
        raise RuntimeError("no C++ compiler (simulated)")

    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    monkeypatch.setattr(static_int8, "_compiled", [])
    monkeypatch.setattr(native, "_library", [])
    monkeypatch.setattr(native, "_compiler", lambda: None)
    monkeypatch.setattr(torch, "compile", no_compiler)
    with caplog.at_level(logging.WARNING):
        encoder = tiny_int8(calibration_texts=nli_sentences())
    assert encoder.quantization == "static"
    assert "without its int8 kernels" in caplog.text and "no C++ compiler" in caplog.text
    assert "quantizes activations eagerly" in caplog.text and "no C++ compiler (simulated)" in caplog.text
    assert np.isfinite(np.asarray(encoder.encode(nli_sentences()[:8]))).all()
