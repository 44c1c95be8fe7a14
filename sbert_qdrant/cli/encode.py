"""``sbert-qdrant encode``: texts from a file or stdin to .npy or JSONL."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

import numpy as np

from ..encoder import encoder_choice, load_encoder
from ..errors import InvalidArgumentError
from ..files import read_rows
from ..types import PRECISIONS


def _read_lines(source: TextIO) -> list[str]:
    """One text per non-empty line (trailing newline removed)."""
    return [line.rstrip("\r\n") for line in source if line.strip()]


def _write_vectors(path: str, texts: list[str], vectors: np.ndarray) -> None:
    try:
        if path.endswith(".npy"):
            np.save(path, vectors)
            return
        out = sys.stdout if path == "-" else open(path, "w", encoding="utf-8")  # noqa: SIM115
        try:
            for text, vector in zip(texts, vectors, strict=True):
                out.write(json.dumps({"text": text, "embedding": vector.tolist()}, ensure_ascii=False) + "\n")
        finally:
            if out is not sys.stdout:
                out.close()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InvalidArgumentError(f"--output {path}: cannot write it ({reason}); pick another path.") from exc


def _encode(args: argparse.Namespace) -> int:
    if args.output != "-" and not args.output.endswith((".npy", ".jsonl")):
        raise InvalidArgumentError(
            f"--output {args.output!r} must end in .npy or .jsonl (or be - for JSONL on stdout)."
        )
    if args.input == "-":
        texts = _read_lines(sys.stdin)
    else:
        texts = [row["text"] for _, row in read_rows(Path(args.input), "txt")]
    choice = encoder_choice(model=args.model, device=args.device, precision=args.precision)
    encoder = load_encoder(**choice, max_seq_length=args.max_seq_length)
    normalize = {"model": None, "yes": True, "no": False}[args.normalize]
    vectors = encoder.encode(texts, batch_size=args.batch_size, normalize=normalize, show_progress_bar=args.progress)
    _write_vectors(args.output, texts, np.asarray(vectors))
    print(
        f"encoded {len(texts)} texts -> {args.output} ({encoder.dimension} dims, "
        f"{encoder.truncated_count} truncated at {encoder.max_seq_length} tokens)",
        file=sys.stderr,
    )
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    encode = commands.add_parser("encode", help="embed texts, one per line, into .npy or JSONL")
    encode.add_argument("input", nargs="?", default="-", help="text file, one text per line (default: stdin)")
    encode.add_argument("-o", "--output", default="-", help="FILE.npy, FILE.jsonl or - for JSONL on stdout")
    encode.add_argument(
        "--model", default=None, help="folder or hub id (default: SBERT_QDRANT_MODEL, else all-MiniLM-L6-v2)"
    )
    encode.add_argument(
        "--device", default=None, help="cpu, cuda, cuda:1, mps (default: SBERT_QDRANT_DEVICE, else best available)"
    )
    encode.add_argument(
        "--precision",
        default=None,
        choices=PRECISIONS,
        help="default: SBERT_QDRANT_PRECISION, else auto: the fastest exact-grade precision of this hardware (static "
        "int8 where the model's shipped calibration was measured exact-grade on this CPU, as the default model's; "
        "else bf16 on CPUs with native bf16, else fp32); int8: static (the shipped or cached calibration, else one "
        "on the first input texts, cached per model; min cosine to fp32 ~0.99), dynamic where static cannot run",
    )
    encode.add_argument("--batch-size", type=int, default=32)
    encode.add_argument("--max-seq-length", type=int, default=None, help="token limit (default: the model's)")
    encode.add_argument(
        "--normalize",
        choices=("model", "yes", "no"),
        default="model",
        help="L2-normalise: as the model does (default), always, or never",
    )
    encode.add_argument("--no-progress", dest="progress", action="store_false", help="hide the progress bar")
    encode.set_defaults(run=_encode)
