"""The native kernels' quantizer, residual add + LayerNorm and AVX2 GEMM (``int8/native.py``), each build this CPU
runs (the AVX2 one on AVX-512 CPUs too) against PyTorch and oneDNN; which build and which int8 GEMM instructions a
CPU gets (``cpu.kernel_isa``, ``cpu.int8_gemm_isa``, environment limits included); and ``int8_kernels``, the line
saying what runs a model."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch
from int8_support import RUNNABLE_ISAS, kernel_library, nli_sentences

from sbert_qdrant import Normalize, Pooling, SentenceEncoder
from sbert_qdrant.encoder import cpu
from sbert_qdrant.encoder.int8 import int8_kernels, native, quantize_int8
from sbert_qdrant.encoder.int8.linear import (
    PAIR_SUM_LIMIT,
    WEIGHT_LEVELS,
    JoinedGemm,
    StaticInt8Linear,
    pair_safe_levels,
    quantize_rows,
)
from sbert_qdrant.testing import tiny_transformer


@pytest.fixture(params=RUNNABLE_ISAS or ["avx2"])
def library(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SBERT_QDRANT_CACHE", str(tmp_path_factory.getbasetemp() / "kernels-cache"))
        return kernel_library(request.param)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width", [384, 100, 5], ids=["384", "100-tail", "5-tail-only"])
def test_quantize_rows_matches_pytorch(library: ctypes.CDLL, dtype: torch.dtype, width: int) -> None:
    generator = torch.Generator().manual_seed(width)
    rows = (torch.randn(37, width, generator=generator) * 4).to(dtype)
    multiplier = torch.rand(width, generator=generator) * 40 + 1  # some values beyond 0..255: clamped
    codes = native.quantize_rows(library, rows, multiplier, 127.0)
    expected = quantize_rows(rows.float(), multiplier, torch.tensor(127.0))
    difference = (codes.int() - expected.int()).abs()
    assert codes.dtype == torch.uint8 and codes.shape == rows.shape
    assert difference.max() <= 1 and (difference > 0).float().mean() < 0.01  # one fused rounding vs two, at halves


@pytest.mark.parametrize("width", [384, 100])
def test_add_layer_norm_matches_pytorch(library: ctypes.CDLL, width: int) -> None:
    generator = torch.Generator().manual_seed(width)
    a, b = torch.randn(2, 3, 17, width, generator=generator) * 3
    norm = torch.nn.LayerNorm(width)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2, generator=generator)
        norm.bias.uniform_(-1, 1, generator=generator)
        expected = norm(a + b)
    torch.testing.assert_close(native.add_layer_norm(library, a, b, norm), expected, atol=2e-5, rtol=1e-5)


#: The native GEMM's fp32 output (no coding).
FP32 = (torch.float32, None, 0.0, 0.0)


def saturating_gemm(rows: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """u8 rows x s8 weights as vpmaddubsw adds them: products of channels 2k and 2k + 1 summed in saturating s16."""
    products = rows.int()[:, None, :] * weight.int()[None, :, :]
    return products.view(rows.shape[0], weight.shape[0], -1, 2).sum(-1).clamp(-32768, 32767).sum(-1)


@pytest.fixture
def avx2_library(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SBERT_QDRANT_CACHE", str(tmp_path_factory.getbasetemp() / "kernels-cache"))
        return kernel_library("avx2")


@pytest.mark.parametrize("rows", [1, 3, 4, 70])  # tiles of 4 rows, blocks of 64, and what is left of both
@pytest.mark.parametrize("gelu", [False, True])
def test_avx2_gemm_matches_a_saturating_reference(avx2_library: ctypes.CDLL, rows: int, gelu: bool) -> None:
    generator = torch.Generator().manual_seed(rows)
    x = torch.randint(0, 256, (rows, 64), dtype=torch.uint8, generator=generator)
    weight = torch.randint(-127, 128, (32, 64), dtype=torch.int8, generator=generator)  # 8 bits: pairs saturate
    offset = torch.randint(-5000, 5000, (32,), dtype=torch.int32, generator=generator)
    scale, bias = torch.rand(32, generator=generator) * 1e-3, torch.randn(32, generator=generator)
    packed = native.pack_weights(avx2_library, weight, wide=False)
    sums = saturating_gemm(x, weight)
    assert (sums != (x.int() @ weight.int().T)).any()  # the reference saturated somewhere
    for used_bias in (bias, None):
        linear = (sums + offset).double() * scale.double() + (0.0 if used_bias is None else used_bias.double())
        expected = torch.nn.functional.gelu(linear) if gelu else linear
        y = native.gemm_s8(avx2_library, x, packed, 32, (offset, scale, used_bias, gelu), FP32)
        assert y.dtype == torch.float32 and y.shape == (rows, 32)
        torch.testing.assert_close(y.double(), expected, atol=1e-5, rtol=1e-5)
    multiplier = torch.rand(32, generator=generator) * 20 + 1
    coding = (torch.uint8, multiplier, 100.0, 0.0)
    codes = native.gemm_s8(avx2_library, x, packed, 32, (offset, scale, None, gelu), coding)
    expected_codes = (expected * multiplier.double() + 100).round().clamp(0, 255)  # the last: without bias
    assert codes.dtype == torch.uint8 and (codes.double() - expected_codes).abs().max() <= 1


@pytest.mark.parametrize("rows", [3, 70])
def test_avx2_gemm_of_s16_inputs_is_exact(avx2_library: ctypes.CDLL, rows: int) -> None:
    generator = torch.Generator().manual_seed(rows)
    x = torch.randint(-11000, 11001, (rows, 1536), dtype=torch.int16, generator=generator)
    weight = torch.randint(-127, 128, (32, 1536), dtype=torch.int8, generator=generator)
    packed = native.pack_weights(avx2_library, weight, wide=True)
    epilogue = (torch.zeros(32, dtype=torch.int32), torch.full((32,), 1e-6), None, False)
    y = native.gemm_s8(avx2_library, x, packed, 32, epilogue, FP32)
    torch.testing.assert_close(y.double(), (x.double() @ weight.double().T) * 1e-6, atol=1e-6, rtol=1e-6)
    multiplier = torch.full((32,), 2.0)  # codes beyond +-30 are clamped there
    codes = native.gemm_s8(avx2_library, x, packed, 32, epilogue, (torch.int16, multiplier, 0.0, 30.0))
    expected = ((x.double() @ weight.double().T) * 2e-6).round().clamp(-30, 30)
    assert codes.dtype == torch.int16 and (codes.double() - expected).abs().max() <= 1
    assert codes.abs().max() == 30 and (codes.abs() < 30).any()


def test_int8_linears_run_the_avx2_gemm_like_onednn(avx2_library: ctypes.CDLL) -> None:
    generator = torch.Generator().manual_seed(5)
    up, down = torch.nn.Linear(64, 128), torch.nn.Linear(128, 64)
    x = torch.randn(40, 64, generator=generator)
    with torch.no_grad():
        hidden = torch.nn.functional.gelu(up(x))
    ranges = [(t.amin(0) - 0.1, t.amax(0) + 0.1) for t in (x, hidden)]
    pairs = []
    for native_gemm in (avx2_library, None):
        first = StaticInt8Linear(up, *ranges[0], weight_levels=WEIGHT_LEVELS["avx2"], native=native_gemm)
        second = StaticInt8Linear(down, *ranges[1], weight_levels=WEIGHT_LEVELS["avx2"], native=native_gemm)
        first.fuse_gelu()
        pairs.append((first, second))
    (fast_up, fast_down), (onednn_up, onednn_down) = pairs
    assert fast_up.native is avx2_library and onednn_up.native is None and "native GEMM" in repr(fast_up)
    with torch.inference_mode():
        torch.testing.assert_close(fast_up(x), onednn_up(x), atol=1e-4, rtol=1e-4)
        expected = onednn_down(onednn_up(x))
        assert fast_up.code_output_for(fast_down) and not onednn_up.code_output_for(onednn_down)
        coded = fast_up(x)  # GELU'd and coded for the down projection: no pass between them
        assert coded.dtype == torch.uint8
        torch.testing.assert_close(fast_down(coded), expected, atol=0.02, rtol=0.02)
    odd = StaticInt8Linear(torch.nn.Linear(64, 40), *ranges[0], native=avx2_library)  # 40 columns: not 16s
    assert odd.native is None and "oneDNN GEMM" in repr(odd)


def test_s16_inputs_track_fp32_closer_than_u8(avx2_library: ctypes.CDLL) -> None:
    generator = torch.Generator().manual_seed(6)
    linear = torch.nn.Linear(128, 64)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(64, 128, generator=generator) * 0.1)
    x = torch.randn(50, 128, generator=generator)
    x[:, :3] *= 30  # outlier channels, as a GELU's input has
    low, high = x.amin(0), x.amax(0)
    wide = StaticInt8Linear(linear, low, high, native=avx2_library, wide_input=True)
    narrow = StaticInt8Linear(linear, low, high, weight_levels=WEIGHT_LEVELS["avx2"], native=avx2_library)
    assert "static s16 x s8" in repr(wide) and wide.input_limit == 32767  # 128 features: all of s16 fits s32 sums
    up, coding_up = (
        StaticInt8Linear(torch.nn.Linear(16, 128), -torch.ones(16), torch.ones(16), native=avx2_library)
        for _ in range(2)
    )
    coding_up.load_state_dict(up.state_dict())
    coding_up.packed_weight = up.packed_weight
    inputs = torch.rand(5, 16, generator=generator) * 2 - 1
    with torch.inference_mode():
        expected = linear(x)
        wide_error, narrow_error = ((layer(x) - expected).abs().max().item() for layer in (wide, narrow))
        assert coding_up.code_output_for(wide)
        coded = coding_up(inputs)  # s16 codes the wide Linear reads as they are
        assert coded.dtype == torch.int16
        torch.testing.assert_close(wide(coded), wide(up(inputs)), atol=1e-3, rtol=1e-3)
    assert wide_error < narrow_error / 1.5  # what is left is the 8-bit weights'
    with pytest.raises(ValueError, match="native AVX2 GEMM only"):
        StaticInt8Linear(linear, low, high, wide_input=True)


def test_each_cpu_class_gets_its_build(monkeypatch: pytest.MonkeyPatch) -> None:
    flags = {"avx2": True, "fma3": True, "avx512_vnni": True}
    monkeypatch.setattr(cpu, "capabilities", lambda: flags)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert cpu.kernel_isa() == ("avx512_vnni", "")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert cpu.kernel_isa() == ("avx2", "ATEN_CPU_CAPABILITY=avx2 keeps PyTorch off AVX-512")
    flags["avx512_vnni"] = False
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    assert cpu.kernel_isa()[0] == "avx2"
    flags["fma3"] = False
    isa, reason = cpu.kernel_isa()
    assert isa is None and "no AVX2 with FMA" in reason


def test_int8_gemms_run_vnni_else_avx2_else_none(monkeypatch: pytest.MonkeyPatch) -> None:
    flags = {"avx2": True, "avx_vnni": True}
    monkeypatch.setattr(cpu, "capabilities", lambda: flags)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    assert cpu.int8_gemm_isa() == ("vnni", "avx_vnni")  # an AVX-VNNI CPU (Alder Lake, Zen 5 client)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert cpu.int8_gemm_isa() == ("avx2", "ONEDNN_MAX_CPU_ISA=AVX2 keeps oneDNN off VNNI int8 instructions")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "SSE41")
    assert cpu.int8_gemm_isa()[0] == "none"
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    flags["avx_vnni"] = False
    assert cpu.int8_gemm_isa() == ("avx2", "the CPU has none of avx512_vnni, avx_vnni, amx_int8")
    flags["avx2"] = False
    assert cpu.int8_gemm_isa()[0] == "none"


def test_avx2_weights_take_eight_bits_only_where_no_pair_can_saturate() -> None:
    """On AVX2, oneDNN's vpmaddubsw adds input channels 2k and 2k + 1's u8 x s8 products in saturating s16: a weight
    row takes 8 bits only where the calibrated input codes keep every such pair below 32767, else 7 (63: safe for
    any input). The Linear runs on this CPU's own GEMMs at the worst inputs its calibration allows."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(32, 64, generator=generator)
    codes = torch.rand(64, generator=generator) * 255
    levels = pair_safe_levels(weight, codes, WEIGHT_LEVELS["avx2"])
    reach = weight.abs() / weight.abs().amax(1, keepdim=True)
    assert (levels * (reach * codes).reshape(32, -1, 2).sum(-1).amax(1) <= PAIR_SUM_LIMIT).all()
    assert levels.min() >= 63 and levels.max() <= 127
    assert (pair_safe_levels(torch.ones(32, 64), torch.full((64,), 255.0), 63) == 64).all()  # 2 x 255 x 64 = 32640
    assert (pair_safe_levels(weight, torch.full((64,), 20.0), 63) == 127).all()

    linear = torch.nn.Linear(64, 32)
    with torch.no_grad():
        linear.weight.copy_(torch.rand(32, 64, generator=generator) + 0.5)  # one sign: pairs add up
    low, high = -torch.rand(64, generator=generator), torch.rand(64, generator=generator) * 0.2
    high[:2] = 4.0  # one wide pair of channels sets the scale; the rest leave room for 8-bit weights
    quantized = StaticInt8Linear(linear, low, high, alpha=0.0, weight_levels=WEIGHT_LEVELS["avx2"])
    assert quantized.weight_bits == {8} and "u8 x s8" in repr(quantized)
    x = torch.cat([high[None], low[None], (low + high)[None] / 2])  # every channel at its calibrated top, etc.
    with torch.inference_mode():
        cosine = torch.nn.functional.cosine_similarity(quantized(x), linear(x), dim=-1)
    assert cosine.min() > 0.999


def test_int8_kernels_names_what_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    assert int8_kernels(tiny_transformer(seed=1).model) == "not int8"
    line = int8_kernels(quantize_int8(tiny_transformer(seed=1).model, None))
    assert line.startswith("dynamic int8 | GEMM: fbgemm ") and "attention: PyTorch" in line
    t = tiny_transformer(seed=1)
    encoder = SentenceEncoder([t, Pooling(t.dimension), Normalize()], device="cpu", precision="int8",
                              calibration_texts=nli_sentences())  # fmt: skip
    if encoder.int8_mode == "static":
        isa = cpu.int8_gemm_isa()[0]
        bits = ("8",) if isa == "vnni" else ("7", "8", "7/8")  # AVX2: 8 bits where no pair can saturate
        line = int8_kernels(encoder)
        ours = native.native_library() is not None and cpu.kernel_isa()[0] == "avx2"
        gemm = "native avx2, u8/s16" if ours else f"oneDNN {isa}, u8"  # ours: the kept Linear reads s16
        assert any(line.startswith(f"static int8 | GEMM: {gemm} x s{b} | attention: ") for b in bits), line
        assert line.count(" | ") == 4 and "add+LayerNorm: " in line


def test_joined_gemm_writes_what_each_linear_would(avx2_library: ctypes.CDLL) -> None:
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(30, 64, generator=generator)
    low, high = x.amin(0), x.amax(0)
    shared = torch.nn.Linear(64, 32).weight.detach().abs().amax(0) + 0.1  # one smoothing for all three
    linears = [
        StaticInt8Linear(torch.nn.Linear(64, 32), low, high, weight_reach=shared, native=avx2_library) for _ in range(3)
    ]
    for index, linear in enumerate(linears):
        linear.quantize_output(0.01 * (index + 1), 128)
    codes = linears[0].quantize(x)
    with torch.inference_mode():
        separate = [linear.gemm(codes) for linear in linears]
        joined = JoinedGemm(linears)(codes)
        again = [linear.gemm(codes) for linear in linears]  # their packed weights now view the joined ones
    assert joined.shape == (30, 96) and joined.dtype == torch.uint8
    for part, alone, after in zip(joined.split(32, dim=1), separate, again, strict=True):
        assert torch.equal(part, alone) and torch.equal(after, alone)
    linears[1].fuse_gelu()
    assert not JoinedGemm.joinable(linears)
