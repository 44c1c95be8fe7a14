"""Unpadded (packed) BERT inference: a batch's texts laid end to end, no padding computed, attention kept within
each text by cumulative sequence offsets (``cu_seqlens``), as flash attention's varlen kernels take them.

On CUDA with half precision the attention is torch's ``torch.nn.attention.varlen.varlen_attn`` (torch >= 2.10);
``reference_attention`` computes the same per text with plain SDPA, so the packing itself is tested on a CPU.
The token vectors come back padded (batch, longest, width), so pooling and every later module run unchanged.
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from .batching import host_tensor
from .features import Features
from .tokens import TokenRows

Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]

#: Keys of a packed batch (besides ``attention_mask``, which stays padded for pooling).
PACKED_KEYS = ("input_ids", "position_ids", "cu_seqlens", "scatter")


def packs(model: nn.Module, device: torch.device, dtype: torch.dtype, all_layers: bool) -> bool:
    """Whether ``model`` can run packed here: a BERT with absolute positions, on an NVIDIA GPU (not a ROCm build)
    whose flash attention torch says it can run (compute capability >= 8) in fp16 / bf16, torch with
    ``torch.nn.attention.varlen``, one output layer wanted."""
    if device.type != "cuda" or dtype not in (torch.float16, torch.bfloat16) or all_layers:
        return False
    if torch.version.hip is not None or not torch.backends.cuda.is_flash_attention_available():
        return False
    config = getattr(model, "config", None)
    if type(model).__name__ != "BertModel" or getattr(config, "position_embedding_type", "absolute") != "absolute":
        return False
    if importlib.util.find_spec("torch.nn.attention.varlen") is None:
        return False
    return torch.cuda.get_device_capability(device)[0] >= 8


def pack(rows: TokenRows, index: np.ndarray, pin: bool) -> Features:
    """Host tensors of a packed batch of texts ``index``: the ids end to end, each text's positions, ``cu_seqlens``
    (int32, n + 1), where each token lands in the padded (n, longest) layout (``scatter``), and the padded
    ``attention_mask``."""
    ids, lengths = rows.gather(index)
    width, total = int(lengths.max()), len(ids)
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    positions = np.arange(total, dtype=np.int64) - np.repeat(starts[:-1], lengths)
    scatter = np.repeat(np.arange(len(lengths), dtype=np.int64) * width, lengths) + positions
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    arrays: dict[str, np.ndarray] = {
        "input_ids": ids,
        "position_ids": positions,
        "cu_seqlens": starts.astype(np.int32),
        "scatter": scatter,
        "attention_mask": mask,
    }
    return {name: host_tensor(array, pin) for name, array in arrays.items()}


def unpacked(features: Features, pad_id: int) -> Features:
    """A packed batch's inputs laid out padded again (``input_ids`` and ``attention_mask``), on its device."""
    mask = features["attention_mask"]
    ids = torch.full((mask.numel(),), pad_id, dtype=features["input_ids"].dtype, device=mask.device)
    ids.index_copy_(0, features["scatter"], features["input_ids"])
    return {"input_ids": ids.view(mask.shape), "attention_mask": mask}


def packed_or_padded(
    run: Callable[[Features], torch.Tensor], features: Features, pad_id: int, fall_back: Callable[[Exception], None]
) -> torch.Tensor:
    """``run(features)``; where a packed batch raises (flash varlen refused on this device), ``fall_back(error)``
    and the same batch run again padded."""
    if "cu_seqlens" not in features:
        return run(features)
    try:
        return run(features)
    except RuntimeError as exc:
        fall_back(exc)
        return run(unpacked(features, pad_id))


def varlen_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, longest: int) -> torch.Tensor:
    """torch's flash varlen attention over (tokens, heads, head_dim) packed texts."""
    from torch.nn.attention.varlen import varlen_attn

    out = varlen_attn(q, k, v, cu, cu, longest, longest)
    return out[0] if isinstance(out, tuple) else out


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, longest: int
) -> torch.Tensor:
    """The same attention, text by text with SDPA (any device; the check of the packing on a CPU)."""
    bounds = cu.tolist()
    parts = [
        functional.scaled_dot_product_attention(
            q[a:b].transpose(0, 1), k[a:b].transpose(0, 1), v[a:b].transpose(0, 1)
        ).transpose(0, 1)
        for a, b in itertools.pairwise(bounds)
    ]
    return torch.cat(parts)


def packed_tokens(model: Any, features: Features, attention: Attention) -> torch.Tensor:
    """``model``'s (a ``BertModel``'s) last hidden states of a packed batch, padded to (n, longest, width) with
    zeros; inference only (dropout is left out)."""
    ids, cu = features["input_ids"], features["cu_seqlens"]
    rows, longest = features["attention_mask"].shape
    embeddings = model.embeddings
    x = embeddings.word_embeddings(ids) + embeddings.position_embeddings(features["position_ids"])
    x = embeddings.LayerNorm(x + embeddings.token_type_embeddings.weight[0])
    heads = int(model.config.num_attention_heads)
    for layer in model.encoder.layer:
        self_attention, total = layer.attention.self, x.shape[0]
        q, k, v = (
            part(x).view(total, heads, -1) for part in (self_attention.query, self_attention.key, self_attention.value)
        )
        context = attention(q, k, v, cu, longest).reshape(total, -1)
        x = layer.attention.output.LayerNorm(layer.attention.output.dense(context) + x)
        inner = layer.intermediate.intermediate_act_fn(layer.intermediate.dense(x))
        x = layer.output.LayerNorm(layer.output.dense(inner) + x)
    padded = x.new_zeros(rows * longest, x.shape[1])
    padded.index_copy_(0, features["scatter"], x)
    return padded.view(rows, longest, -1)
