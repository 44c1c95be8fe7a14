"""Distilled int8 weights saved with a model folder (``sbert-qdrant quantize``): the transformer layers' weights
trained to make static int8 reproduce the fp32 model (``training.int8_distill``) in one int8 GEMM ISA's arithmetic,
and the activation ranges they were trained with. The folder's own weights stay the original ones, which fp32 and
bf16 run; ``precision="int8"`` loads these into the model before quantizing it on a CPU of their ISA (elsewhere the
original weights run, with these ranges), and ``"auto"`` runs them where their measured losses are exact-grade on
this CPU's int8 ISA (``ActivationRanges.int8_verdict``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from .calibration import ActivationRanges, int8_isa

logger = logging.getLogger(__name__)
#: The distilled weights and their ranges, in a model folder.
WEIGHTS_FILE = "int8_weights.safetensors"
RANGES_FILE = "int8_ranges.safetensors"
#: The int8 GEMM ISA of weights saved without one (distillation simulated only the AVX2 GEMM then).
TRAINED_ISA = "avx2"


@dataclass(frozen=True)
class DistilledInt8:
    """Trained weights by parameter name of the transformer's model, the ranges to quantize them with, and the int8
    GEMM ISA (``calibration.int8_isa``) they were trained for."""

    weights: dict[str, torch.Tensor]
    ranges: ActivationRanges
    isa: str = TRAINED_ISA

    def save(self, folder: Path) -> None:
        """Write both files into ``folder`` (a saved model folder)."""
        weights = {name: t.contiguous() for name, t in self.weights.items()}
        save_file(weights, str(folder / WEIGHTS_FILE), metadata={"isa": self.isa})  # the ISA they were trained for
        self.ranges.save(folder / RANGES_FILE)

    @classmethod
    def read(cls, folder: Path) -> DistilledInt8 | None:
        """The distilled int8 of a model folder; None where it has none."""
        ranges = ActivationRanges.read(folder / RANGES_FILE)
        if ranges is None or not (folder / WEIGHTS_FILE).is_file():
            return None
        path = str(folder / WEIGHTS_FILE)
        with safe_open(path, framework="pt") as f:
            isa = (f.metadata() or {}).get("isa", TRAINED_ISA)
        return cls(load_file(path), ranges, isa)

    def weights_here(self) -> dict[str, torch.Tensor] | None:
        """The weights, where this CPU runs the int8 ISA they were trained for (None elsewhere: the original weights
        run, with these ranges)."""
        return self.weights if _runs_here(self.isa) else None


def _runs_here(isa: str) -> bool:
    here = int8_isa()
    if here != isa:
        logger.info("static int8 runs the original weights: the distilled ones are for the %s GEMM, not %s", isa, here)
    return here == isa
