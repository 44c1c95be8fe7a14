"""CUDA paths: fp16/bf16 on the GPU agree with fp32 and stay on the device only per batch (skipped without CUDA)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sbert_qdrant import SentenceEncoder

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; none is visible to torch"),
]


def test_auto_device_is_cuda() -> None:
    assert SentenceEncoder.load().device.type == "cuda"


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precisions_match_fp32_on_cuda(precision: str, stsb_sample) -> None:  # type: ignore[no-untyped-def]
    texts = stsb_sample[0] + stsb_sample[1]
    exact = SentenceEncoder.load(device="cuda", precision="fp32").encode(texts, batch_size=256)
    reduced = SentenceEncoder.load(device="cuda", precision=precision).encode(texts, batch_size=256)  # type: ignore[arg-type]
    assert isinstance(reduced, np.ndarray) and reduced.dtype == np.float32
    assert (exact * reduced).sum(axis=1).min() > 0.999


def test_output_is_not_stacked_on_the_gpu(stsb_sample) -> None:  # type: ignore[no-untyped-def]
    encoder = SentenceEncoder.load(device="cuda", precision="fp16")
    texts = (stsb_sample[0] + stsb_sample[1]) * 4
    encoder.encode(texts[:64], batch_size=64)
    torch.cuda.reset_peak_memory_stats()
    encoder.encode(texts[:64], batch_size=64)
    one_batch = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    encoder.encode(texts, batch_size=64)
    # many batches peak no higher than one (plus allocator slack): results go to host memory per batch
    assert torch.cuda.max_memory_allocated() < one_batch * 1.5 + 2**20


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_unpadded_encoding_matches_padded_on_cuda(precision: str, stsb_sample) -> None:  # type: ignore[no-untyped-def]
    from sbert_qdrant.encoder.packed import packs

    encoder = SentenceEncoder.load(device="cuda", precision=precision)  # type: ignore[arg-type]
    model = encoder.transformer.model
    if not packs(model, encoder.device, model.dtype, all_layers=False):
        pytest.skip("torch.nn.attention.varlen or a compute capability >= 8 GPU is missing")
    texts = stsb_sample[0] + stsb_sample[1]
    packed = encoder.encode(texts, batch_size=512)
    encoder.unpadded = False
    padded = encoder.encode(texts, batch_size=512)
    assert (packed * padded).sum(axis=1).min() >= 0.9999


def test_token_budget_batches_on_cuda_match_the_cpu(stsb_sample) -> None:  # type: ignore[no-untyped-def]
    texts = (stsb_sample[0] + stsb_sample[1]) * 3
    gpu = SentenceEncoder.load(device="cuda", precision="fp32")
    gpu.batch_tokens = 512  # many small batches: every hand-off of the pipeline runs
    cpu = SentenceEncoder.load(device="cpu", precision="fp32").encode(texts)
    assert (gpu.encode(texts, batch_size=4096) * cpu).sum(axis=1).min() > 0.9999


def test_cross_encoder_and_multivector_run_through_the_pipeline_on_cuda(stsb_sample) -> None:  # type: ignore[no-untyped-def]
    from sbert_qdrant import CrossEncoder
    from sbert_qdrant.encoder import MultiVectorEncoder

    pairs = list(zip(stsb_sample[0], stsb_sample[1], strict=True))
    on_cpu = CrossEncoder.from_transformer(device="cpu", seed=1)
    on_gpu = CrossEncoder.from_transformer(device="cuda", seed=1)
    assert np.allclose(on_cpu.predict(pairs), on_gpu.predict(pairs), atol=1e-4)
    tokens = MultiVectorEncoder.from_encoder(SentenceEncoder.load(device="cuda", precision="fp32"))
    cpu_tokens = MultiVectorEncoder.from_encoder(SentenceEncoder.load(device="cpu", precision="fp32"))
    for a, b in zip(tokens.encode_document(stsb_sample[0]), cpu_tokens.encode_document(stsb_sample[0]), strict=True):
        assert a.shape == b.shape and (a * b).sum(axis=1).min() > 0.999
