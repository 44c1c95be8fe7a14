"""How one encoder's transformer runs int8: static with known activation ranges (calibrated on texts given at load,
cached, or shipped with the package), static once calibrated on the first texts it encodes, or dynamic where static
int8 does not run on this CPU."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import torch
from torch import nn

from ..features import Features
from .calibration import (
    CALIBRATION_TEXTS,
    FEW_CALIBRATION_TEXTS,
    ActivationRanges,
    static_calibration,
    static_supported,
)
from .quantize import int8_mode, quantize_int8

logger = logging.getLogger(__name__)


class Int8Plan:
    """The int8 of ``model`` (fp32 until :meth:`apply`): ``texts`` to calibrate on (None: ``ranges`` where given,
    else the cached or shipped ranges of ``weights_digest``), ``batches`` and ``run`` to calibrate with (texts ->
    collated batches -> fp32 forward); ``weights``: distilled weights for ``ranges`` (``distilled.py``), loaded into
    the model before it is quantized. Without any ranges, the model stays fp32 until it has seen
    :data:`FEW_CALIBRATION_TEXTS` texts (the calls before run one at a time, exact), then calibrates on them (up to
    :data:`CALIBRATION_TEXTS`), caches the ranges (later loads read them: the same vectors in every process) and
    runs static int8."""

    def __init__(
        self,
        model: nn.Module,
        weights_digest: str,
        texts: Sequence[Any] | None,
        batches: Callable[[list[Any]], Iterable[Features]],
        run: Callable[[Features], object],
        ranges: ActivationRanges | None = None,
        weights: dict[str, torch.Tensor] | None = None,
    ) -> None:
        self.model, self._digest, self._batches, self._run = model, weights_digest, batches, run
        supported = static_supported()
        if supported and ranges is not None and texts is None:
            self.ranges: ActivationRanges | None = ranges  # certified for these weights, saved with their folder
        else:
            self.ranges = static_calibration(model, weights_digest, texts, batches, run) if supported else None
        #: Weights to load into the model before it is quantized: the distilled ones, where their ranges run.
        self._distilled = weights if self.ranges is not None and self.ranges is ranges else None
        #: Waiting for the first texts to calibrate on.
        self.pending = supported and self.ranges is None
        self._seen: list[Any] = []
        self._lock = threading.Lock()
        if self.pending:
            logger.info(
                "static int8: no calibration for this model yet; it runs fp32 until it has encoded %d texts, then "
                "calibrates on them and caches the ranges (pass calibration_texts=[...] to choose them).",
                FEW_CALIBRATION_TEXTS,
            )

    @property
    def mode(self) -> Literal["static", "dynamic"] | None:
        """ "static" (also while pending) or "dynamic"."""
        return "static" if self.pending else int8_mode(self.model)

    def apply(self) -> None:
        """Quantize the model now, unless waiting for texts to calibrate on."""
        if not self.pending:
            if self._distilled is not None:
                self.model.load_state_dict(self._distilled, strict=False)
            quantize_int8(self.model, self.ranges)

    @contextmanager
    def first_texts(self, items: Sequence[Any]) -> Iterator[None]:
        """Around one encode call of ``items``: while pending, calls run one at a time, and the one that brings the
        texts seen to :data:`FEW_CALIBRATION_TEXTS` calibrates and quantizes before it runs."""
        if not self.pending:
            yield
            return
        with self._lock:
            if self.pending:
                self._seen.extend(items[: CALIBRATION_TEXTS - len(self._seen)])
                if len(self._seen) >= FEW_CALIBRATION_TEXTS:
                    self.ranges = static_calibration(self.model, self._digest, self._seen, self._batches, self._run)
                    quantize_int8(self.model, self.ranges)
                    self.pending, self._seen = False, []
            yield
