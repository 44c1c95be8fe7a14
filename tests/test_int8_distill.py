"""Quantization-aware distillation of static int8: the simulation computes what the AVX2 kernels compute, training
moves it towards fp32, and ``quantize_model`` writes a folder whose int8 runs the distilled weights while fp32 runs
the original ones. A tiny random BERT, so that it all runs in seconds."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from int8_support import held_out_texts, nli_sentences

from sbert_qdrant import SentenceEncoder, testing
from sbert_qdrant.encoder.int8.calibration import ActivationRanges, calibrate, int8_isa
from sbert_qdrant.encoder.int8.distilled import RANGES_FILE, WEIGHTS_FILE
from sbert_qdrant.encoder.int8.quantize import quantize_static_int8
from sbert_qdrant.encoder.int8.simulate import simulate_int8
from sbert_qdrant.training.int8_distill import DistillConfig, distill_int8, quantize_model

Calibrated = tuple[SentenceEncoder, ActivationRanges]
needs_avx2 = pytest.mark.skipif(int8_isa() != "avx2", reason="the simulation mirrors the AVX2 int8 GEMM only")


def _encode(encoder: SentenceEncoder, texts: list[str]) -> np.ndarray:
    return np.asarray(encoder.encode(texts, batch_size=16))


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def calibrated() -> Calibrated:
    encoder = testing.tiny_encoder()
    ranges = calibrate(encoder.transformer.model, encoder._calibration_batches(nli_sentences()), encoder.transformer)
    return encoder, ranges


@needs_avx2
def test_the_simulation_computes_what_static_int8_computes(calibrated: Calibrated, cache: Path) -> None:
    encoder, ranges = calibrated
    features = encoder.tokenize(held_out_texts()[:60])
    real, simulated = copy.deepcopy(encoder), copy.deepcopy(encoder)
    quantize_static_int8(real.transformer.model, ranges)
    simulate_int8(simulated.transformer.model, ranges)
    with torch.inference_mode():  # token states: a random BERT's pooled vectors all point one way
        exact, int8, sim = (e.transformer(dict(features))["token_embeddings"] for e in (encoder, real, simulated))
    mask = features["attention_mask"].bool()
    assert (sim - int8)[mask].norm() < 0.25 * (int8 - exact)[mask].norm()


def test_distillation_trains_the_layers_towards_fp32(calibrated: Calibrated, tmp_path: Path) -> None:
    encoder, ranges = calibrated
    before = {n: p.detach().clone() for n, p in encoder.transformer.model.named_parameters()}
    config = DistillConfig(steps=3, batch_size=8, lr=1e-3)
    weights, step = distill_int8(encoder, ranges, nli_sentences(), config, tmp_path / "ckpt.pt", None)
    assert step == 3 and (tmp_path / "ckpt.pt").is_file()
    assert weights and all(".layer." in name for name in weights)
    assert any(not torch.equal(weights[n], before[n]) for n in weights)
    for name, parameter in encoder.transformer.model.named_parameters():  # the teacher is left as it was
        assert torch.equal(parameter, before[name])


@needs_avx2
def test_quantize_writes_a_folder_int8_loads_distilled_and_fp32_original(tmp_path: Path, cache: Path) -> None:
    original = testing.tiny_encoder()
    original.save(tmp_path / "tiny")
    out = tmp_path / "quantized"
    texts = nli_sentences()
    assert quantize_model(tmp_path / "tiny", texts, out, DistillConfig(steps=2, batch_size=8), max_seconds=0) == 0
    assert not (out / WEIGHTS_FILE).exists()  # stopped before a step: a checkpoint, no folder yet
    assert quantize_model(tmp_path / "tiny", texts, out, DistillConfig(steps=2, batch_size=8)) == 2
    assert (out / WEIGHTS_FILE).is_file() and (out / RANGES_FILE).is_file()
    sample = held_out_texts()[:20]
    fp32 = SentenceEncoder.load(out, device="cpu", precision="fp32")
    np.testing.assert_allclose(_encode(fp32, sample), _encode(original, sample), atol=1e-6)
    int8 = SentenceEncoder.load(out, device="cpu", precision="int8")
    assert int8.int8_mode == "static"
    assert _cosines(_encode(int8, sample), _encode(original, sample)).min() > 0.9


def test_distilled_weights_load_only_where_their_int8_isa_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights trained in one ISA's arithmetic run on that ISA's CPUs only (elsewhere the original weights run)."""
    from sbert_qdrant.encoder.int8 import distilled

    ranges = ActivationRanges({"a": torch.zeros(2)}, {"a": torch.ones(2)}, "d")
    distilled.DistilledInt8({"w": torch.ones(2)}, ranges, isa="vnni").save(tmp_path)
    again = distilled.DistilledInt8.read(tmp_path)
    assert again is not None and again.isa == "vnni" and again.ranges.texts_digest == "d"
    monkeypatch.setattr(distilled, "int8_isa", lambda: "avx2")
    assert again.weights_here() is None
    monkeypatch.setattr(distilled, "int8_isa", lambda: "vnni")
    here = again.weights_here()
    assert here is not None and torch.equal(here["w"], torch.ones(2))
