"""Distilled int8 weights saved with a model folder (``sbert-qdrant quantize``): the transformer layers' weights
trained to make static int8 reproduce the fp32 model (``training.int8_distill``) and the activation ranges they were
trained with. The folder's own weights stay the original ones, which fp32 and bf16 run; ``precision="int8"`` loads
these into the model before quantizing it, and ``"auto"`` runs them where their measured losses are exact-grade on
this CPU's int8 ISA (``ActivationRanges.int8_verdict``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .calibration import ActivationRanges

#: The distilled weights and their ranges, in a model folder.
WEIGHTS_FILE = "int8_weights.safetensors"
RANGES_FILE = "int8_ranges.safetensors"


@dataclass(frozen=True)
class DistilledInt8:
    """Trained weights by parameter name of the transformer's model, and the ranges to quantize them with."""

    weights: dict[str, torch.Tensor]
    ranges: ActivationRanges

    def save(self, folder: Path) -> None:
        """Write both files into ``folder`` (a saved model folder)."""
        save_file({name: t.contiguous() for name, t in self.weights.items()}, str(folder / WEIGHTS_FILE))
        self.ranges.save(folder / RANGES_FILE)

    @classmethod
    def read(cls, folder: Path) -> DistilledInt8 | None:
        """The distilled int8 of a model folder; None where it has none."""
        ranges = ActivationRanges.read(folder / RANGES_FILE)
        if ranges is None or not (folder / WEIGHTS_FILE).is_file():
            return None
        return cls(load_file(str(folder / WEIGHTS_FILE)), ranges)
