"""Fine-tune the default model for duplicate-question detection (OnlineContrastiveLoss, the Quora recipe).

Reports average precision and best-threshold F1 on held-out pairs before and after. Defaults use the committed
Quora sample (first 40 pairs train, last 20 evaluate), for a quick look; pass the shared Quora file for a real run.

    python examples/train_quora_duplicates.py --output /tmp/quora-model
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sbert_qdrant import SentenceEncoder
from sbert_qdrant.training import (
    OnlineContrastiveLoss,
    PairClassificationEvaluator,
    Trainer,
    TrainingConfig,
    read_binary_pairs,
)

DATA = Path(__file__).parent.parent / "tests" / "data" / "quora_train_sample.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=Path, default=DATA, help="JSONL with question1, question2, is_duplicate")
    parser.add_argument("--held-out", type=float, default=1 / 3, help="share of pairs kept for evaluation")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--max-steps", type=int, default=None, help="default: one epoch")
    args = parser.parse_args()

    pairs = read_binary_pairs(args.pairs)
    cut = int(len(pairs) * (1 - args.held_out))
    train, held_out = pairs[:cut], pairs[cut:]
    evaluator = PairClassificationEvaluator(
        [p.texts[0] for p in held_out], [p.texts[1] for p in held_out], [int(p.label or 0) for p in held_out]
    )
    encoder = SentenceEncoder.load(precision="fp32")  # trained: fp32 weights
    before = evaluator(encoder)
    config = TrainingConfig(max_steps=args.max_steps, batch_size=32, show_progress_bar=True)
    Trainer(encoder, [(OnlineContrastiveLoss(encoder, margin=0.5), train)], config, output_dir=args.output).fit()
    after = evaluator(encoder)
    for key in ("ap", "f1", "accuracy"):
        print(f"{key:>8}: {before[key]:6.2f} -> {after[key]:6.2f}")


if __name__ == "__main__":
    main()
