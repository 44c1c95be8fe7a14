"""The load flags of every command that loads the configured encoder: one flag per ``EncoderSpec`` field, named
as the field (``--truncate-dim`` -> ``truncate_dim``), each defaulting to its ``SBERT_QDRANT_*`` setting."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from ..errors import InvalidArgumentError, ModelNotFoundError
from ..types import PRECISIONS

if TYPE_CHECKING:
    from ..encoder import EncoderSpec
    from ..settings import Settings


def add_load_options(parser: argparse.ArgumentParser) -> None:
    """``--model``, ``--device``, ``--precision`` and ``--truncate-dim``."""
    parser.add_argument(
        "--model", default=None, help="folder or hub id (default: SBERT_QDRANT_MODEL, else all-MiniLM-L6-v2)"
    )
    parser.add_argument(
        "--device", default=None, help="cpu, cuda, cuda:1, mps (default: SBERT_QDRANT_DEVICE, else best available)"
    )
    parser.add_argument(
        "--precision",
        default=None,
        choices=PRECISIONS,
        help="default: SBERT_QDRANT_PRECISION, else auto: the fastest exact-grade precision of this hardware (static "
        "int8 where the model's shipped calibration was measured exact-grade on this CPU, as the default model's; "
        "else bf16 on CPUs with native bf16, else fp32); int8: static (the shipped or cached calibration, else one "
        "on the first input texts, cached per model; min cosine to fp32 ~0.99), dynamic where static cannot run",
    )
    parser.add_argument(
        "--truncate-dim",
        type=int,
        default=None,
        metavar="N",
        help="cut vectors to their first N values, for Matryoshka models (default: SBERT_QDRANT_TRUNCATE_DIM, else "
        "full length); a normalizing model's cut vectors are normalized again",
    )


#: The device types torch names (``torch.device``), each optionally with an index (``cuda:1``).
_DEVICE = re.compile(r"(cpu|cuda|mps|xpu|hip|hpu|mtia|meta|xla|privateuseone)(:\d+)?")


def check_load_flags(args: argparse.Namespace) -> None:
    """The load flags that can be checked without torch, before a heavy import: ``--device`` is a torch device,
    ``--truncate-dim`` positive, a ``--model`` written as a path is a folder."""
    device = getattr(args, "device", None)
    if device is not None and not _DEVICE.fullmatch(device):
        raise InvalidArgumentError(f"--device {device!r} is not a torch device; use cpu, cuda, cuda:1 or mps.")
    truncate = getattr(args, "truncate_dim", None)
    if truncate is not None and truncate < 1:
        raise InvalidArgumentError(f"--truncate-dim={truncate} must be a positive integer (values kept per vector).")
    check_model_flag(getattr(args, "model", None), "--model")


def check_model_flag(model: str | None, flag: str) -> None:
    """A model flag's folder or hub id found before anything heavy is imported (a hub id not cached is looked up
    as loading it would)."""
    if model is None:
        return
    from ..encoder.loading import resolve_model_folder  # no torch: folders, the package, the hub's cache

    try:
        resolve_model_folder(model)
    except ModelNotFoundError as exc:
        raise ModelNotFoundError(f"{flag} {model!r}: {str(exc).replace(chr(10) + '  - ', ' ').strip()}") from None


def encoder_spec(args: argparse.Namespace, settings: Settings | None = None) -> EncoderSpec:
    """The spec the load flags name, each flag not given read from ``settings`` (None: the environment)."""
    from ..encoder import EncoderSpec  # torch: only once a command loads a model

    given = {name: getattr(args, name) for name in EncoderSpec.names()}
    return EncoderSpec.of(settings, **given)
