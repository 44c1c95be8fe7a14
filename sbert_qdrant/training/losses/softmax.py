"""SoftmaxLoss: the SBERT paper's NLI objective, a classifier over ``(u, v, |u - v|[, u * v])``.

Its classifier head is saved next to the model, in ``softmax_head/`` (a folder sentence-transformers
ignores), so training can continue from it and the model can predict NLI labels.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from ...encoder import SentenceEncoder
from ...encoder.base import CONFIG_FILE, WEIGHTS_FILE, read_weights
from ...encoder.folder import read_json
from ...errors import InvalidArgumentError, InvalidInputError, ModelLoadError
from ...types import LabelKind
from ..data import NLI_LABELS, Example
from .base import Batch, SentenceObjective

HEAD_FOLDER = "softmax_head"


class SoftmaxLoss(SentenceObjective):
    """Cross-entropy of a linear classifier over the concatenated pair features.

    Inputs: (sentence1, sentence2) pairs with a class index into ``labels``.
    The paper's best setting (and the default) concatenates u, v and |u - v|; ``concat_product`` adds u * v.
    """

    label_kind: ClassVar[LabelKind | None] = "class"

    def __init__(
        self,
        encoder: SentenceEncoder,
        labels: Sequence[str] = NLI_LABELS,
        concat_vectors: bool = True,
        concat_difference: bool = True,
        concat_product: bool = False,
    ) -> None:
        super().__init__(encoder)
        parts = 2 * concat_vectors + concat_difference + concat_product
        if parts == 0:
            raise InvalidArgumentError(
                "SoftmaxLoss needs at least one of concat_vectors, concat_difference, concat_product."
            )
        if len(labels) < 2 or len(set(labels)) != len(labels):
            raise InvalidArgumentError(f"labels={list(labels)!r} must name two or more distinct classes.")
        self.labels = tuple(labels)
        self.concat_vectors = concat_vectors
        self.concat_difference = concat_difference
        self.concat_product = concat_product
        self.classifier = nn.Linear(parts * encoder.output_dimension, len(self.labels), device=encoder.device)

    def logits(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Class scores ``(batch, num_labels)`` for sentence vectors u and v."""
        parts = [u, v] if self.concat_vectors else []
        if self.concat_difference:
            parts.append((u - v).abs())
        if self.concat_product:
            parts.append(u * v)
        return self.classifier(torch.cat(parts, dim=1).to(self.classifier.weight.dtype))

    def loss(self, embeddings: list[torch.Tensor], batch: Batch) -> torch.Tensor:
        u, v = embeddings
        return nn.functional.cross_entropy(self.logits(u, v).float(), self.batch_labels(batch))

    def check_examples(self, examples: Sequence[Example], name: str = "examples") -> None:
        super().check_examples(examples, name)
        for i, example in enumerate(examples):
            if not isinstance(example.label, int) or not 0 <= example.label < len(self.labels):
                raise InvalidInputError(
                    f"{name}[{i}] has label {example.label!r}; SoftmaxLoss needs a class index in "
                    f"0..{len(self.labels) - 1} for labels {list(self.labels)}."
                )

    def predict_proba(self, sentences1: Sequence[str], sentences2: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Class probabilities ``(n, num_labels)``, columns in the order of ``labels``."""
        if len(sentences1) != len(sentences2):
            raise InvalidInputError(f"got {len(sentences1)} first and {len(sentences2)} second sentences; pair them.")
        whole = self.encoder.output_dimension  # the head reads what training gave it: uncut vectors
        u = self.encoder.encode(sentences1, batch_size=batch_size, convert_to="torch", truncate_dim=whole)
        v = self.encoder.encode(sentences2, batch_size=batch_size, convert_to="torch", truncate_dim=whole)
        device = self.classifier.weight.device
        with torch.inference_mode():
            logits = self.logits(torch.as_tensor(u, device=device), torch.as_tensor(v, device=device))
        return torch.softmax(logits.float(), dim=1).cpu().numpy()

    def predict(self, sentences1: Sequence[str], sentences2: Sequence[str], batch_size: int = 32) -> list[str]:
        """The most likely label name for each pair."""
        best = self.predict_proba(sentences1, sentences2, batch_size).argmax(axis=1)
        return [self.labels[i] for i in best]

    def save_head(self, model_dir: str | os.PathLike[str]) -> None:
        """Write the classifier to ``model_dir/softmax_head`` (config.json + model.safetensors)."""
        folder = Path(model_dir) / HEAD_FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        config = {
            "labels": list(self.labels),
            "embedding_dimension": self.encoder.output_dimension,
            "concat_vectors": self.concat_vectors,
            "concat_difference": self.concat_difference,
            "concat_product": self.concat_product,
        }
        (folder / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
        state = {k: v.detach().float().contiguous().cpu() for k, v in self.classifier.state_dict().items()}
        save_file(state, str(folder / WEIGHTS_FILE))

    @classmethod
    def load_head(cls, encoder: SentenceEncoder, model_dir: str | os.PathLike[str]) -> SoftmaxLoss:
        """Rebuild the objective, trained head included, from a folder written by :meth:`save_head`."""
        folder = Path(model_dir) / HEAD_FOLDER
        config = read_json(folder / CONFIG_FILE)
        if config.get("embedding_dimension") != encoder.output_dimension:
            raise ModelLoadError(
                f"{folder} was trained on {config.get('embedding_dimension')}-dim vectors but the encoder gives "
                f"{encoder.output_dimension}; load the encoder saved in {model_dir}."
            )
        try:
            loss = cls(
                encoder,
                labels=[str(x) for x in config["labels"]],
                concat_vectors=bool(config["concat_vectors"]),
                concat_difference=bool(config["concat_difference"]),
                concat_product=bool(config["concat_product"]),
            )
        except KeyError as exc:
            raise ModelLoadError(f"{folder / CONFIG_FILE} lacks {exc}; re-save the head.") from None
        state = read_weights(folder, loss.classifier.state_dict().keys())
        loss.classifier.load_state_dict({k: v.to(encoder.device) for k, v in state.items()})
        return loss
