"""``sbert-qdrant quantize``: distill a model's static int8 (quantization-aware, the fp32 model as teacher) into a
folder that loads as int8 with the distilled weights and as fp32 / bf16 with the original ones."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from ._input import read_records

_DESCRIPTION = """\
Fine-tune MODEL's static int8, simulated exactly as precision='int8' runs it on this CPU's int8 instructions (AVX2),
to reproduce MODEL's fp32 embeddings on the unlabelled texts of --texts (a few thousand like those you will encode;
the first 512 also calibrate the activation ranges), and write --out: MODEL's folder (its original weights, which
fp32 and bf16 run) plus int8_weights.safetensors and int8_ranges.safetensors (which precision='int8' runs).
Training stops after --steps or --max-minutes; run the same command again to continue from the checkpoint in --out.
Exit status: 0 when the folder is complete, 3 when stopped early (run again), 2 on bad input."""


def _quantize(args: argparse.Namespace) -> int:
    from ..training.int8_distill import DistillConfig, quantize_model

    texts = [record.text for record in read_records(args.texts, args.format, args.text_field, None, [])]
    config = DistillConfig(steps=args.steps, batch_size=args.batch_size, lr=args.lr)
    seconds = None if args.max_minutes is None else args.max_minutes * 60
    step = quantize_model(args.model, texts, args.out, config, seconds)
    if step < config.steps:
        print(f"stopped at step {step} of {config.steps}; run again to continue ({args.out})", file=sys.stderr)
        return 3
    logging.getLogger(__name__).info("distilled int8 written to %s", args.out)
    print(args.out)
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    quantize = commands.add_parser(
        "quantize",
        help="distill a model's static int8 on your texts into a folder that loads as int8 (quantization-aware)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    quantize.add_argument("model", nargs="?", default=None, help="folder or hub id (default: the default model)")
    quantize.add_argument("--texts", type=Path, required=True, help="JSONL/CSV/TSV file of unlabelled texts")
    quantize.add_argument("--text-field", default="text", help="the texts' field or column (default: text)")
    quantize.add_argument("--format", default=None, help="file format when the suffix does not say")
    quantize.add_argument("--out", type=Path, required=True, help="folder to write (and to resume from)")
    quantize.add_argument("--steps", type=int, default=1000, help="training steps (default 1000)")
    quantize.add_argument("--batch-size", type=int, default=32)
    quantize.add_argument("--lr", type=float, default=2e-5)
    quantize.add_argument("--max-minutes", type=float, default=None, help="stop after this long (resume later)")
    quantize.set_defaults(run=_quantize)
