"""Int8 self-attention of static int8 encoders (``int8/native_layers.py``, its kernels in ``int8/kernels/int8.cpp``
and ``int8_avx2.cpp`` loaded by ``int8/native.py``): each build this CPU runs, through
:class:`StaticInt8SelfAttention` with real static int8 Linears, against PyTorch's fp32 attention on the same
dequantized q/k/v (head sizes 32 and 64, padded batches, split over threads); ``key_validity`` for every mask form
transformers passes; and with the real default model: attention installed where the kernel runs, activation ranges
carrying ``output_reach``, PyTorch's attention (saying why) where the kernels are switched off or the ranges predate
``output_reach``, and padded, single and threaded batches tracking fp32."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from int8_support import RUNNABLE_ISAS, held_out_texts, kernel_library, needs_static, nli_sentences

from sbert_qdrant import SentenceEncoder
from sbert_qdrant.encoder import cpu
from sbert_qdrant.encoder.int8 import calibration, native, native_layers
from sbert_qdrant.encoder.int8.build import compiler
from sbert_qdrant.encoder.int8.calibration import ActivationRanges
from sbert_qdrant.encoder.int8.linear import StaticInt8Linear
from sbert_qdrant.encoder.int8.native_layers import ZERO_POINT, StaticInt8SelfAttention, key_validity

KERNEL_UNSUPPORTED = native.native_unsupported() or (None if compiler() else "no C++ compiler")
needs_kernel = pytest.mark.skipif(
    KERNEL_UNSUPPORTED is not None, reason=f"the int8 kernels cannot run here: {KERNEL_UNSUPPORTED}"
)


@pytest.fixture(scope="module", autouse=True)
def kernels(cache: Path) -> object:
    """The kernels as this module's cache builds them (each cache folder loads its own library)."""
    return native.native_library()


@pytest.fixture(params=RUNNABLE_ISAS or ["avx2"])
def library(request: pytest.FixtureRequest, cache: Path) -> ctypes.CDLL:
    """Each build of the kernels this CPU runs (the AVX2 one on AVX-512 CPUs too)."""
    return kernel_library(request.param)


# --- the kernel against PyTorch --------------------------------------------------------------------------------


def attention_case(
    library: ctypes.CDLL, head_size: int, lengths: list[int], seed: int = 0
) -> tuple[StaticInt8SelfAttention, dict]:
    """A BERT-like self-attention (random weights scaled so that softmax rows peak at ~0.4, neither uniform nor
    one-hot) made static int8 as ``quantize_static_int8`` does: input ranges and output reaches calibrated on the
    inputs it will run, q/k/v sharing one smoothing, the output projection calibrated on the fp32 context."""
    generator = torch.Generator().manual_seed(seed)
    heads, width, length = 128 // head_size, 96, max(lengths)
    x = torch.randn(len(lengths), length, width, generator=generator)
    x[..., 5] *= 8  # an outlier channel, as BERT's hidden states have
    linears = [torch.nn.Linear(width, heads * head_size) for _ in range(3)]
    for linear in linears:
        torch.nn.init.normal_(linear.weight, std=0.08, generator=generator)
    mask = torch.tensor([[1] * n + [0] * (length - n) for n in lengths])
    rows = x.reshape(-1, width)
    low, high = rows.amin(0), rows.amax(0)
    with torch.no_grad():
        shared = torch.stack([linear.weight.detach().abs().amax(0) for linear in linears]).amax(0)
        fp32 = [linear(rows) for linear in linears]
        context = reference_attention(*fp32, mask, heads)
    real = context[mask.reshape(-1) == 1]
    output = StaticInt8Linear(torch.nn.Linear(heads * head_size, 16), real.amin(0), real.amax(0))
    quantized = [StaticInt8Linear(linear, low, high, weight_reach=shared) for linear in linears]
    reach = tuple(float(y.abs().max()) for y in fp32)
    module = StaticInt8SelfAttention(library, *quantized, heads, output, reach)  # type: ignore[arg-type]
    return module, {"x": x, "mask": mask, "heads": heads, "output": output, "reach": reach}


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, heads: int
) -> torch.Tensor:
    """fp32 SDPA of [batch * length, heads * head_size] rows under a padding mask, as rows again."""
    batch, length = mask.shape

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(batch, length, heads, -1).transpose(1, 2)

    keys = mask.bool()[:, None, None, :]
    out = torch.nn.functional.scaled_dot_product_attention(split(q), split(k), split(v), attn_mask=keys)
    return out.transpose(1, 2).reshape(batch * length, -1)


def dequantized_qkv(module: StaticInt8SelfAttention, x: torch.Tensor, reach: tuple[float, ...]) -> list[torch.Tensor]:
    """q, k and v as the kernel reads them: the module's own u8 GEMM outputs, value = reach / 127 * (u8 - 128)."""
    quantized = module.query.quantize(x.reshape(-1, x.shape[-1]))
    codes = [linear.gemm(quantized) for linear in (module.query, module.key, module.value)]
    assert all(c.dtype == torch.uint8 for c in codes)
    return [(c.float() - ZERO_POINT) * r / 127 for c, r in zip(codes, reach, strict=True)]


@pytest.fixture(params=[1, 3], ids=["1-thread", "3-threads"])
def threads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """torch's thread count while a test runs; with 3, every kernel call splits its (batch, head) pairs (some ranges
    starting mid-sequence, at a head other than the first)."""
    monkeypatch.setattr(native, "SPLIT_SIZE", 1)
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.mark.parametrize("head_size", [32, 64])
def test_kernel_tracks_pytorch_attention(library: ctypes.CDLL, head_size: int, threads: int) -> None:
    module, case = attention_case(library, head_size, [37, 20, 1, 16])
    x, mask, output = case["x"], case["mask"], case["output"]
    with torch.inference_mode():
        codes = module(x, mask)[0].reshape(-1, 128)
        expected = reference_attention(*dequantized_qkv(module, x, case["reach"]), mask, case["heads"])
    real = mask.reshape(-1) == 1
    context = (codes.float() - output.x_zero_point) / output.x_multiplier
    per_head = torch.nn.functional.cosine_similarity(
        context[real].reshape(-1, head_size), expected[real].reshape(-1, head_size), dim=-1
    )
    assert per_head.min() > 0.99, per_head.min()
    assert (codes[~real] == output.x_zero_point).all()  # padded query rows: the zero point


def test_long_rows_lose_no_more_than_the_outputs_own_rounding(library: ctypes.CDLL) -> None:
    """Over 256 keys many small probabilities carry the context: the 8-bit softmax, its small weights dithered, adds
    little to the error of rounding the exact context to u8 (about 5 %; rounded to nearest, the small ones vanish and
    add about 20 %)."""
    torch.manual_seed(0)  # the output projection's weights
    module, case = attention_case(library, 32, [256, 180, 256])
    x, mask, output = case["x"], case["mask"], case["output"]
    with torch.inference_mode():
        codes = module(x, mask)[0].reshape(-1, 128)
        expected = reference_attention(*dequantized_qkv(module, x, case["reach"]), mask, case["heads"])
    real = mask.reshape(-1) == 1
    rounded = torch.clamp(torch.round(expected * output.x_multiplier + output.x_zero_point), 0, 255)

    def error(c: torch.Tensor) -> float:
        context = (c.float() - output.x_zero_point) / output.x_multiplier
        return float((context[real] - expected[real]).norm() / expected[real].norm())

    assert error(codes) < error(rounded) * 1.1, (error(codes), error(rounded))


def test_padded_positions_get_no_attention(library: ctypes.CDLL) -> None:
    module, case = attention_case(library, 32, [40, 9, 23], seed=1)
    x, mask = case["x"], case["mask"]
    noisy = x.clone()
    noisy[mask == 0] = torch.randn(int((mask == 0).sum()), x.shape[-1]) * 50  # other q, k and v where padded
    sdpa_mask = mask.bool()[:, None, None, :].expand(3, 1, 40, 40)  # as transformers passes it
    with torch.inference_mode():
        before, after = (module(inputs, sdpa_mask)[0].reshape(-1, 128) for inputs in (x, noisy))
    real = mask.reshape(-1) == 1
    assert torch.equal(before[real], after[real])


def test_a_head_size_the_kernel_cannot_run_is_refused(library: ctypes.CDLL) -> None:
    module, case = attention_case(library, 32, [12, 5])
    parts = (module.query, module.key, module.value)
    odd = StaticInt8SelfAttention(module.library, *parts, 16, case["output"], case["reach"])
    with pytest.raises(ValueError, match="head size 8"), torch.inference_mode():  # 16 heads of 8 columns
        odd(case["x"], case["mask"])


def test_query_key_value_share_one_input_scale_only_with_a_shared_weight_reach() -> None:
    linears = [torch.nn.Linear(32, 32) for _ in range(3)]
    low, high = -torch.rand(32) * 4, torch.rand(32) * 4
    shared = torch.stack([linear.weight.detach().abs().amax(0) for linear in linears]).amax(0)
    together = [StaticInt8Linear(linear, low, high, weight_reach=shared) for linear in linears]
    apart = [StaticInt8Linear(linear, low, high) for linear in linears]
    assert together[0].shares_input_scale(*together[1:])
    assert not apart[0].shares_input_scale(*apart[1:])


# --- key_validity -----------------------------------------------------------------------------------------------

LENGTHS = [[1, 1, 1, 0], [1, 1, 0, 0]]


def additive(mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask.bool(), 0.0, torch.finfo(torch.float32).min)


@pytest.mark.parametrize(
    "mask",
    [
        torch.tensor(LENGTHS),
        torch.tensor(LENGTHS).bool(),
        torch.tensor(LENGTHS).bool()[:, None, None, :].expand(2, 1, 4, 4),  # sdpa's expanded boolean mask
        additive(torch.tensor(LENGTHS))[:, None, None, :],  # eager's additive mask
        additive(torch.tensor(LENGTHS))[:, None, None, :].expand(2, 1, 4, 4),
    ],
    ids=["2d-int", "2d-bool", "4d-bool", "4d-additive", "4d-additive-expanded"],
)
def test_key_validity_reads_padding_masks(mask: torch.Tensor) -> None:
    valid = key_validity(mask, 2, 4)
    assert valid.dtype == torch.uint8 and valid.is_contiguous()
    assert valid.tolist() == LENGTHS


def test_key_validity_without_a_mask_reads_every_key() -> None:
    assert key_validity(None, 3, 5).tolist() == [[1] * 5] * 3


@pytest.mark.parametrize(
    "mask",
    [torch.ones(2, 4, 4), torch.ones(2, 5), torch.ones(2, 1, 4, 5), torch.ones(4)],
    ids=["3d", "2d-other-length", "4d-other-length", "1d"],
)
def test_key_validity_refuses_other_masks(mask: torch.Tensor) -> None:
    with pytest.raises(ValueError, match="padding masks only"):
        key_validity(mask, 2, 4)


# --- the real default model -------------------------------------------------------------------------------------


def attention_modules(encoder: SentenceEncoder) -> list[StaticInt8SelfAttention]:
    return [m for m in encoder.modules() if isinstance(m, StaticInt8SelfAttention)]


def saved_ranges(folder: Path) -> tuple[Path, ActivationRanges]:
    (path,) = (folder / "int8").glob("*.safetensors")
    ranges = ActivationRanges.read(path)
    assert ranges is not None
    return path, ranges


#: Min cosine to fp32 by the GEMMs' ISA: AVX2's 7-bit weights cost a little (a one-word text, "Why?", 0.974 there).
TRACKS_FP32 = 0.98 if cpu.int8_gemm_isa()[0] == "vnni" else 0.97


def assert_tracks_fp32(encoder: SentenceEncoder, exact: SentenceEncoder, texts: list[str], **kwargs: object) -> None:
    cosines = (np.asarray(encoder.encode(texts, **kwargs)) * np.asarray(exact.encode(texts, **kwargs))).sum(axis=1)
    assert cosines.min() > TRACKS_FP32, cosines.min()


@pytest.mark.slow
@needs_static
@needs_kernel
def test_static_encoder_runs_int8_attention(
    static_encoder: SentenceEncoder,
    default_encoder: SentenceEncoder,
    cache: Path,
) -> None:
    layers = static_encoder.transformer.model.config.num_hidden_layers
    modules = attention_modules(static_encoder)
    assert len(modules) == layers
    for module in modules:
        assert module.query.shares_input_scale(module.key, module.value)
        assert module.query.output_dtype == torch.uint8
        # q, k and v in one GEMM exactly where theirs are the native (AVX2) ones
        assert (module.joined is not None) == (module.query.native is not None)
    _, ranges = saved_ranges(cache)
    names = calibration.quantized_layer_names(default_encoder.transformer.model)
    assert set(ranges.output_reach) == set(ranges.low) == set(names)
    assert all(reach > 0 for reach in ranges.output_reach.values())
    assert list((cache / "kernels").glob("int8-*.so"))


@pytest.mark.slow
@needs_static
def test_switched_off_attention_stays_pytorch_saying_why(
    static_encoder: SentenceEncoder,  # calibrates the module's cache
    default_encoder: SentenceEncoder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("SBERT_QDRANT_NATIVE", "off")
    with caplog.at_level("INFO", logger="sbert_qdrant.encoder.int8.native"):
        encoder = SentenceEncoder.load(device="cpu", precision="int8")
    assert "without its int8 kernels" in caplog.text and "SBERT_QDRANT_NATIVE=off" in caplog.text
    assert encoder.int8_mode == "static" and not attention_modules(encoder)
    assert not any(isinstance(m, native_layers.ResidualLayerNorm) for m in encoder.modules())
    assert_tracks_fp32(encoder, default_encoder, held_out_texts()[::4])


@pytest.mark.slow
@needs_static
def test_a_calibration_without_output_reach_loads_and_is_redone_given_its_texts(
    static_encoder: SentenceEncoder,
    default_encoder: SentenceEncoder,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    path, current = saved_ranges(cache)
    older = tmp_path / path.relative_to(cache)
    ActivationRanges(current.low, current.high, current.texts_digest).save(older)  # as saved before output_reach
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    encoder = SentenceEncoder.load(device="cpu", precision="int8")
    assert encoder.int8_mode == "static" and not attention_modules(encoder)
    assert_tracks_fp32(encoder, default_encoder, held_out_texts()[::4])
    again = SentenceEncoder.load(device="cpu", precision="int8", calibration_texts=nli_sentences())
    _, redone = saved_ranges(tmp_path)
    assert set(redone.output_reach) == set(redone.low)
    if KERNEL_UNSUPPORTED is None:
        assert attention_modules(again)


LONG = max(held_out_texts(), key=len)  # a SciFact abstract: cut at the model's 256 tokens


@pytest.mark.slow
@needs_static
@pytest.mark.parametrize(
    "texts",
    [["A man is playing a guitar."], ["Hello", LONG, "cats", LONG[:300], "Why?"]],
    ids=["one-text", "one-word-and-256-token-texts"],
)
def test_batches_track_fp32(
    static_encoder: SentenceEncoder,
    default_encoder: SentenceEncoder,
    texts: list[str],
) -> None:
    assert_tracks_fp32(static_encoder, default_encoder, texts, batch_size=8)


@pytest.mark.slow
@needs_static
@needs_kernel
def test_attention_splits_over_threads_tracking_fp32(
    static_encoder: SentenceEncoder,
    default_encoder: SentenceEncoder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = ["Hello", LONG, "A man is playing a guitar.", LONG[:300]]
    calls: list[int] = []

    def counted(run: object, items: int, values: int) -> list[int | None]:
        parts = native.split(run, items, values)  # type: ignore[arg-type]
        calls.append(len(parts))
        return parts

    monkeypatch.setattr(native_layers, "split", counted)
    threads = torch.get_num_threads()
    vectors = {}
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            calls.clear()
            vectors[count] = np.asarray(static_encoder.encode(texts, batch_size=8))
            assert calls and max(calls) == count  # 1 thread: one call; 2: the (batch, head) pairs split in two
    finally:
        torch.set_num_threads(threads)
    assert (vectors[1] * vectors[2]).sum(axis=1).min() > 0.999
    exact = np.asarray(default_encoder.encode(texts, batch_size=8))
    for count in (1, 2):
        assert (vectors[count] * exact).sum(axis=1).min() > 0.98
