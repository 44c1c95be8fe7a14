"""``sbert-qdrant encode``: texts from a file or stdin to .npy or JSONL."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..errors import InvalidArgumentError
from ..files import read_rows
from ._load import add_load_options, encoder_spec

if TYPE_CHECKING:
    import numpy as np


def _read_lines(source: TextIO) -> list[str]:
    """One text per non-empty line (trailing newline removed)."""
    return [line.rstrip("\r\n") for line in source if line.strip()]


def _write_vectors(path: str, texts: list[str], vectors: np.ndarray) -> None:
    import numpy as np

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
    if args.batch_size is not None and args.batch_size < 1:
        raise InvalidArgumentError(f"--batch-size={args.batch_size} must be a positive integer.")
    if args.output != "-" and not args.output.endswith((".npy", ".jsonl")):
        raise InvalidArgumentError(
            f"--output {args.output!r} must end in .npy or .jsonl (or be - for JSONL on stdout)."
        )
    if args.input == "-":
        texts = _read_lines(sys.stdin)
    else:
        texts = [row["text"] for _, row in read_rows(Path(args.input), "txt")]
    import numpy as np

    encoder = encoder_spec(args).load(max_seq_length=args.max_seq_length)
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
    add_load_options(encode)
    encode.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="texts per batch at most (default: 32 on a CPU, the token budget on a GPU)",
    )
    encode.add_argument("--max-seq-length", type=int, default=None, help="token limit (default: the model's)")
    encode.add_argument(
        "--normalize",
        choices=("model", "yes", "no"),
        default="model",
        help="L2-normalise: as the model does (default), always, or never",
    )
    encode.add_argument("--no-progress", dest="progress", action="store_false", help="hide the progress bar")
    encode.set_defaults(run=_encode)
