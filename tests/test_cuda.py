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
