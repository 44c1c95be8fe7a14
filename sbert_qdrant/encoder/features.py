"""The value every encoder module maps to another: a features dict (``input_ids``, ``attention_mask``,
``token_embeddings``, ``sentence_embedding``, ...), as in sentence-transformers."""

from __future__ import annotations

import torch

Features = dict[str, torch.Tensor]
