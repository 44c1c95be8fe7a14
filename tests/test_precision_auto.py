"""precision="auto" (the fastest exact-grade precision of the hardware) and parallel CPU batches."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from conftest import tiny_transformer

from sbert_qdrant import CrossEncoder, InvalidArgumentError, Pooling, SentenceEncoder
from sbert_qdrant.encoder import cpu, runtime
from sbert_qdrant.encoder.int8 import ActivationRanges, calibration
from sbert_qdrant.settings import Settings
from sbert_qdrant.training import SoftmaxLoss, Trainer

TEXTS = [f"sentence number {i} " + "word " * (i % 7) for i in range(70)]


def tiny(precision: str = "auto") -> SentenceEncoder:
    t = tiny_transformer()
    return SentenceEncoder([t, Pooling(t.dimension)], device="cpu", precision=precision)  # type: ignore[arg-type]


@pytest.mark.parametrize(("native", "chosen"), [(True, "bf16"), (False, "fp32")])
def test_auto_picks_bf16_only_on_cpus_with_native_bf16(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, native: bool, chosen: str
) -> None:
    monkeypatch.setattr(cpu, "native_bf16", lambda: native)
    with caplog.at_level(logging.INFO, logger="sbert_qdrant.encoder.runtime"):
        encoder = tiny()
    assert encoder.precision == chosen and encoder.auto_precision
    assert f"precision={chosen!r} (auto)" in repr(encoder)
    assert f"precision='auto' runs {chosen} on cpu" in caplog.text
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[chosen]
    assert next(encoder.transformer.model.parameters()).dtype == dtype


def test_auto_says_why_shipped_int8_ranges_do_not_run(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 58: ranges within the dev limit but past the held-apart one run the next exact precision, saying why."""
    monkeypatch.setattr(cpu, "native_bf16", lambda: False)
    monkeypatch.setattr(calibration, "int8_isa", lambda: "avx2")
    losses = {"avx2": {"stsb_dev": 0.03, "sick": 0.01, "mnli_m": 0.05, "xnli": 0.33}}
    monkeypatch.setattr(calibration, "shipped_ranges", lambda _: ActivationRanges({}, {}, "", losses=losses))
    with caplog.at_level(logging.INFO, logger="sbert_qdrant.encoder"):
        encoder = tiny()
    assert encoder.precision == "fp32" and encoder.auto_precision
    assert "does not run int8: static int8 lost 0.330 Spearman x100 on xnli with avx2 (limit 0.075)" in caplog.text
    assert "precision='auto' runs fp32 on cpu" in caplog.text


def test_explicit_precision_is_kept_and_not_marked_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu, "native_bf16", lambda: True)
    encoder = tiny("fp32")
    assert encoder.precision == "fp32" and not encoder.auto_precision and "(auto)" not in repr(encoder)


def test_the_cpu_test_reads_torch_capabilities(monkeypatch: pytest.MonkeyPatch) -> None:
    for limit in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY"):
        monkeypatch.delenv(limit, raising=False)
    capabilities = torch.cpu.get_capabilities()
    assert cpu.native_bf16() == bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))


@pytest.mark.parametrize(
    "limit", ["ONEDNN_MAX_CPU_ISA=AVX2", "ATEN_CPU_CAPABILITY=avx2", "ONEDNN_MAX_CPU_ISA=avx512_core"]
)
def test_an_isa_limit_below_bf16_means_no_native_bf16(monkeypatch: pytest.MonkeyPatch, limit: str) -> None:
    monkeypatch.setattr(cpu, "capabilities", lambda: {"avx2": True, "avx512_bf16": True})
    name, value = limit.split("=")
    monkeypatch.setenv(name, value)
    assert not cpu.native_bf16()  # oneDNN's bf16 would run reference code there: an emulated AVX2 CPU is not bf16


def test_load_defaults_to_auto_and_the_cross_encoder_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu, "native_bf16", lambda: False)
    assert SentenceEncoder.load(device="cpu").auto_precision
    fresh = CrossEncoder.from_transformer(device="cpu")
    assert fresh.precision == "fp32" and not fresh.auto_precision  # a new head is for training


def test_training_an_auto_half_precision_encoder_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu, "native_bf16", lambda: True)
    encoder = tiny()
    with pytest.raises(InvalidArgumentError, match=r"precision='bf16' \(chosen by precision='auto'.*precision='fp32'"):
        Trainer(encoder, [(SoftmaxLoss(encoder), [])])


def test_settings_refuse_an_unknown_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SBERT_QDRANT_PRECISION", "fp8")
    with pytest.raises(ValueError, match="precision"):
        Settings()


@pytest.mark.parametrize(("threads", "expected"), [(1, (1, 1)), (2, (2, 1)), (4, (4, 1)), (16, (4, 4))])
def test_cpu_streams_share_the_threads(threads: int, expected: tuple[int, int]) -> None:
    assert runtime.cpu_streams(threads) == expected


def test_parallel_batches_give_the_sequential_vectors_and_restore_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    encoder = tiny("fp32")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        parallel = encoder.encode(TEXTS, batch_size=4)
        assert torch.get_num_threads() == 2
        monkeypatch.setattr(runtime, "MAX_CPU_STREAMS", 1)
        sequential = encoder.encode(TEXTS, batch_size=4)
    finally:
        torch.set_num_threads(before)
    np.testing.assert_allclose(parallel, sequential, atol=1e-6)


def test_an_error_in_a_parallel_batch_reaches_the_caller_and_threads_are_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)

    def fails(index: np.ndarray) -> None:
        raise RuntimeError(f"batch {index.tolist()} failed")

    try:
        with pytest.raises(RuntimeError, match="failed"):
            runtime.run_batches([np.arange(2), np.arange(2, 4)], fails, torch.device("cpu"), False, "Encoding")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_batches_end_where_the_token_count_changes_once_half_full() -> None:
    lengths = [5] * 20 + [4] * 7 + [9] * 3 + [3] * 40
    batches = runtime.length_sorted_batches(lengths, 8)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))  # every text once
    assert all(1 <= len(batch) <= 8 for batch in batches)
    counts = [sorted({lengths[i] for i in batch}, reverse=True) for batch in batches]
    assert counts[0] == [9, 5]  # 3 texts of 9 tokens: under half a batch, topped up with the next count
    assert [len(batch) for batch in batches] == [8, 8, 7, 7, 8, 8, 8, 8, 8]  # cut at 5 -> 4 and 4 -> 3
    assert all(len(c) == 1 for c in counts[1:])
    padded = sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)
    assert padded - sum(lengths) == 5 * (9 - 5)  # only the first batch's five texts of 5 tokens
