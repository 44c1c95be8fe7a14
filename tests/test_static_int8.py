"""Static int8 (issues 26, 37): vectors track fp32 on real text with the default model, which needs no texts (its
calibration ships with the package, and ``auto`` runs it where it was measured exact-grade); a reload reads the cached
calibration instead of calibrating again; a model without one calibrates on its first texts; without VNNI int8 falls
back to dynamic, saying why, and
without its native kernels (switched off, or no compiler) it runs on PyTorch's paths, saying why. Activation ranges
save atomically."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from int8_support import held_out_texts, needs_static, nli_sentences

from sbert_qdrant import Normalize, Pooling, SentenceEncoder
from sbert_qdrant.encoder import cpu
from sbert_qdrant.encoder.int8 import calibration, linear, native_layers
from sbert_qdrant.encoder.int8.calibration import ActivationRanges
from sbert_qdrant.errors import InvalidArgumentError, InvalidInputError, SbertQdrantError


@pytest.mark.slow
@needs_static
def test_static_int8_vectors_track_fp32(static_encoder: SentenceEncoder, default_encoder: SentenceEncoder) -> None:
    texts = held_out_texts()
    assert static_encoder.int8_mode == "static"
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

    monkeypatch.setattr(calibration, "calibrate", no_calibration)
    with caplog.at_level(logging.INFO, logger="sbert_qdrant.encoder.int8.calibration"):
        again = SentenceEncoder.load(device="cpu", precision="int8")
        same_texts = SentenceEncoder.load(device="cpu", precision="int8", calibration_texts=nli_sentences())
    assert "calibration read from" in caplog.text and str(cache) in caplog.text
    texts = held_out_texts()[:40]
    first = np.asarray(static_encoder.encode(texts))
    for reloaded in (again, same_texts):
        assert reloaded.int8_mode == "static"
        assert (np.asarray(reloaded.encode(texts)) * first).sum(axis=1).min() > 0.9999


def tiny_int8(**kwargs: object) -> SentenceEncoder:
    from conftest import tiny_transformer

    t = tiny_transformer(seed=3)
    return SentenceEncoder([t, Pooling(t.dimension), Normalize()], device="cpu", precision="int8", **kwargs)  # type: ignore[arg-type]


def test_cpu_without_an_int8_gemm_isa_falls_back_to_dynamic_saying_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    monkeypatch.setattr(cpu, "int8_gemm_isa", lambda: ("none", "the CPU has neither VNNI nor AVX2 (simulated)"))
    with caplog.at_level(logging.WARNING):
        encoder = tiny_int8(calibration_texts=nli_sentences())
    assert encoder.int8_mode == "dynamic"
    assert "runs dynamic int8: the CPU has neither VNNI nor AVX2 (simulated)" in caplog.text
    assert not any(tmp_path.rglob("*.safetensors"))  # nothing calibrated or written


def quantized(encoder: SentenceEncoder) -> bool:
    return any(isinstance(m, linear.StaticInt8Linear) for m in encoder.modules())


@needs_static
def test_without_a_calibration_int8_calibrates_on_the_first_texts_it_encodes(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    with caplog.at_level(logging.INFO, logger="sbert_qdrant.encoder.int8"):
        encoder = tiny_int8()
    assert encoder.int8_mode == "static" and not quantized(encoder)
    assert "calibration_texts=" in caplog.text  # the way to choose the texts
    texts = nli_sentences()
    few = np.asarray(encoder.encode(texts[:10]))  # fewer than a calibration needs: exact fp32
    assert not quantized(encoder) and not any(tmp_path.rglob("*.safetensors"))
    encoder.encode(texts[10:])
    assert quantized(encoder) and len(list(tmp_path.rglob("*.safetensors"))) == 1
    later = tiny_int8()  # another load (or process) of the same weights reads the cached calibration at once
    assert quantized(later)
    again = np.asarray(later.encode(texts[:10]))
    assert (again * np.asarray(encoder.encode(texts[:10]))).sum(axis=1).min() > 0.9999  # same ranges, same vectors
    assert (again * few).sum(axis=1).min() > 0.9  # int8 of a random tiny model still tracks its fp32


@needs_static
def test_kept_attention_projections_run_s16_beside_the_int8_attention_kernel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 58's lever: Linears named in the ranges' ``kept`` stay out of u8; q, k and v go s16 on the AVX2 GEMM (on
    VNNI CPUs too), so the int8 attention kernel still reads their u8 outputs."""
    from dataclasses import replace

    from conftest import tiny_transformer

    from sbert_qdrant.encoder.int8 import quantize
    from sbert_qdrant.encoder.int8.native import native_library

    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    texts = nli_sentences()
    tiny_int8(calibration_texts=texts)  # calibrates and caches the ranges
    ranges = ActivationRanges.read(next(tmp_path.rglob("*.safetensors")))
    assert ranges is not None
    kept = tuple(name for name in ranges.low if name.endswith((".query", ".key", ".value")))
    t = tiny_transformer(seed=3)
    encoder = SentenceEncoder([t, Pooling(t.dimension), Normalize()], device="cpu", precision="fp32")
    exact = np.asarray(encoder.encode(texts))
    quantize.quantize_static_int8(encoder.transformer.model, replace(ranges, kept=kept))
    query = encoder.transformer.model.get_submodule(kept[0])
    if quantize._wide_library(native_library()) is not None:
        assert isinstance(query, linear.StaticInt8Linear) and query.input_dtype == torch.int16
        assert any(isinstance(m, native_layers.StaticInt8SelfAttention) for m in encoder.modules())
    else:  # no kernels: bf16 where native, else fp32, and PyTorch's attention
        assert not isinstance(query, linear.StaticInt8Linear)
    assert (np.asarray(encoder.encode(texts)) * exact).sum(axis=1).min() > 0.9  # a random tiny model still tracks


@needs_static
def test_a_kept_attention_output_leaves_the_attention_to_pytorch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An attention output projection kept on s16 inputs cannot read the int8 attention's u8 context: the attention
    stays PyTorch's there (it wrote garbage before: cosine to fp32 about 0 with the default model)."""
    from dataclasses import replace

    from conftest import tiny_transformer

    from sbert_qdrant.encoder.int8 import quantize

    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    texts = nli_sentences()
    tiny_int8(calibration_texts=texts)  # calibrates and caches the ranges
    ranges = ActivationRanges.read(next(tmp_path.rglob("*.safetensors")))
    assert ranges is not None
    kept = tuple(name for name in ranges.low if name.endswith("attention.output.dense"))
    t = tiny_transformer(seed=3)
    encoder = SentenceEncoder([t, Pooling(t.dimension), Normalize()], device="cpu", precision="fp32")
    exact = np.asarray(encoder.encode(texts))
    quantize.quantize_static_int8(encoder.transformer.model, replace(ranges, kept=kept))
    assert not any(isinstance(m, native_layers.StaticInt8SelfAttention) for m in encoder.modules())
    assert (np.asarray(encoder.encode(texts)) * exact).sum(axis=1).min() > 0.9


@pytest.mark.slow
@needs_static
def test_the_default_model_runs_static_int8_with_no_texts(
    default_encoder: SentenceEncoder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))  # no calibration of one's own: the shipped one runs
    encoder = SentenceEncoder.load(device="cpu", precision="int8")
    assert encoder.int8_mode == "static" and quantized(encoder)
    assert not list(tmp_path.rglob("*.safetensors"))  # nothing calibrated
    texts = held_out_texts()
    cosines = (np.asarray(encoder.encode(texts)) * np.asarray(default_encoder.encode(texts))).sum(axis=1)
    assert cosines.min() > 0.98, cosines.min()


def test_the_shipped_calibration_records_its_measured_losses() -> None:
    from torch import nn

    from sbert_qdrant.encoder.identity import weights_digest
    from sbert_qdrant.encoder.loading import DEFAULT_MODEL, load_modules, resolve_model_folder

    digest = weights_digest(nn.ModuleList(load_modules(resolve_model_folder(DEFAULT_MODEL))))
    shipped = ActivationRanges.read(calibration.packaged_ranges_path(digest))
    assert shipped is not None and shipped.losses, "the default model's int8 ranges are shipped with their losses"
    assert set(shipped.losses) == {"vnni", "avx2"}  # measured on both (docs/int8.md)
    held_apart = {"mnli_m", "mnli_mm", "xnli", "snli_dev", "quora"}
    assert all(set(losses) == calibration.DEV_SETS | held_apart for losses in shipped.losses.values())
    for isa, losses in shipped.losses.items():  # auto's verdict is what the recorded losses say, set by set
        dev_ok = all(losses[name] <= calibration.EXACT_GRADE_LOSS for name in calibration.DEV_SETS)
        held_ok = all(losses[name] <= calibration.HELD_APART_LOSS for name in held_apart)
        assert shipped.exact_grade(isa) == (dev_ok and held_ok), (isa, losses)


def test_auto_needs_held_apart_losses_within_their_limit_and_dev_ones_within_theirs() -> None:
    def ranges(losses: dict[str, float]) -> ActivationRanges:
        return ActivationRanges({}, {}, "", losses={"vnni": losses})

    dev = {"stsb_dev": 0.03, "sick": 0.01}
    assert not ranges(dev).exact_grade("vnni")  # dev sets alone flatter int8: a held-apart one is needed
    assert "no held-apart set" in str(ranges(dev).int8_verdict("vnni"))
    assert ranges(dev | {"mnli_m": 0.07, "quora": -0.02}).exact_grade("vnni")
    assert not ranges(dev | {"mnli_m": 0.07}).exact_grade("avx2")  # not measured with this ISA
    too_far = ranges(dev | {"mnli_m": 0.07, "xnli": 0.19})
    assert too_far.int8_verdict("vnni") == "static int8 lost 0.190 Spearman x100 on xnli with vnni (limit 0.075)"
    assert not ranges({"stsb_dev": 0.06, "mnli_m": 0.0}).exact_grade("vnni")  # 0.05 on a dev set
    assert ranges({"agreement": 0.2}).exact_grade("vnni", 0.3)  # an explicit limit (the cross-encoder's) as before


@pytest.mark.slow
@pytest.mark.parametrize("exact_grade", [True, False])
def test_auto_runs_static_int8_only_where_it_was_measured_exact_grade(
    exact_grade: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from dataclasses import replace

    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    monkeypatch.setattr(calibration, "int8_isa", lambda: "vnni")
    monkeypatch.setattr(calibration, "static_supported", lambda: True)
    shipped = calibration.shipped_ranges
    held = 0.01 if exact_grade else 0.12  # as if measured within the held-apart limit, or past it
    losses = {"vnni": {"stsb_dev": 0.01, "sick": 0.0, "mnli_m": held, "quora": 0.0}}
    monkeypatch.setattr(calibration, "shipped_ranges", lambda digest: replace(shipped(digest), losses=losses))
    with caplog.at_level(logging.INFO, logger="sbert_qdrant.encoder"):
        encoder = SentenceEncoder.load(device="cpu")
    assert encoder.auto_precision
    if exact_grade:
        assert encoder.precision == "int8" and encoder.int8_mode == "static"
    else:
        assert encoder.precision == ("bf16" if cpu.native_bf16() else "fp32") and encoder.int8_mode is None
        assert "does not run int8: static int8 lost 0.120 Spearman x100 on mnli_m with vnni" in caplog.text


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
    assert quantized.int8_mode == "static"
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

    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))  # no library built here yet
    monkeypatch.setenv("PATH", str(tmp_path / "no-compiler-here"))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(linear, "_compiled", [])
    monkeypatch.setattr(cpu, "aten_limit", lambda: None)  # as on a CPU not held below its ISA: torch.compile is tried
    monkeypatch.setattr(torch, "compile", no_compiler)
    with caplog.at_level(logging.WARNING):
        encoder = tiny_int8(calibration_texts=nli_sentences())
    assert encoder.int8_mode == "static"
    assert "without its int8 kernels" in caplog.text and "no C++ compiler" in caplog.text
    assert "quantizes activations eagerly" in caplog.text and "no C++ compiler (simulated)" in caplog.text
    assert np.isfinite(np.asarray(encoder.encode(nli_sentences()[:8]))).all()


@needs_static
def test_switched_off_static_int8_runs_without_kernels_saying_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    monkeypatch.setenv("SBERT_QDRANT_NATIVE", "off")
    with caplog.at_level(logging.INFO):
        encoder = tiny_int8(calibration_texts=nli_sentences())
    assert encoder.int8_mode == "static"
    assert "without its int8 kernels" in caplog.text and "SBERT_QDRANT_NATIVE=off" in caplog.text
    kernel_modules = (native_layers.StaticInt8SelfAttention, native_layers.ResidualLayerNorm)
    assert not any(isinstance(m, kernel_modules) for m in encoder.modules())
    assert not any(isinstance(m, linear.StaticInt8Linear) and m.quantizer_library for m in encoder.modules())
    assert not (tmp_path / "kernels").exists()  # nothing built
    assert np.isfinite(np.asarray(encoder.encode(nli_sentences()[:8]))).all()


def test_activation_ranges_save_atomically_beside_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    ranges = ActivationRanges({"a": torch.zeros(4)}, {"a": torch.ones(4)}, "digest", {"a": 2.0})
    path = tmp_path / "int8" / "model.safetensors"
    ranges.save(path)
    ranges.save(path)  # over an existing file
    again = ActivationRanges.read(path)
    assert again is not None and again.texts_digest == "digest" and again.output_reach == {"a": 2.0}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left behind

    def interrupted(*_: object, **__: object) -> None:
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(calibration, "save_file", interrupted)
    with pytest.raises(OSError, match="disk full"):
        ActivationRanges({}, {}, "other").save(path)
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    kept = ActivationRanges.read(path)
    assert kept is not None and kept.texts_digest == "digest"  # the old file is whole
    assert kept.kept is None and kept.alphas == {}  # none chosen: the defaults


def test_activation_ranges_carry_the_linears_kept_out_of_u8_and_their_alphas(tmp_path: Path) -> None:
    import torch

    path = tmp_path / "model.safetensors"
    chosen = ("encoder.layer.0.output.dense", "encoder.layer.3.attention.self.query")
    ActivationRanges({"a": torch.zeros(4)}, {"a": torch.ones(4)}, "d", kept=chosen, alphas={"a": 0.6}).save(path)
    again = ActivationRanges.read(path)
    assert again is not None and again.kept == chosen and again.alphas == {"a": 0.6}


def test_concurrent_saves_of_one_model_do_not_collide(tmp_path: Path) -> None:
    """Two processes calibrating the same model save to one path: each writes its own temporary file (a fixed
    temporary name would be renamed away under the other writer)."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    path = tmp_path / "model.safetensors"
    low = {f"layer{i}": -torch.rand(4096) for i in range(16)}  # long enough writes to overlap
    high = {name: -t for name, t in low.items()}

    def save(writer: int) -> None:
        for _ in range(5):
            ActivationRanges(low, high, f"writer {writer}").save(path)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(save, range(4)))
    saved = ActivationRanges.read(path)
    assert saved is not None and saved.texts_digest.startswith("writer ")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
