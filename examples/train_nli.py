"""Fine-tune an SBERT encoder on NLI with the paper's softmax objective, scoring STS before and after.

Defaults run in about a minute on CPU on the committed samples; point ``--nli`` and ``--sts`` at the shared files
(``../shared/data/nli/snli_train_subset_cat.tsv.gz``, ``../shared/data/stsb/stsb_dev.tsv.gz``) for a real run.

    python examples/train_nli.py --output /tmp/nli-model [--max-steps 20]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sbert_qdrant import SentenceEncoder
from sbert_qdrant.training import SoftmaxLoss, STSEvaluator, Trainer, TrainingConfig, read_nli, read_scored_pairs

DATA = Path(__file__).parent.parent / "tests" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nli", type=Path, default=DATA / "nli_train_sample.tsv", help="premise/hypothesis/label")
    parser.add_argument("--sts", type=Path, default=DATA / "stsb_dev_sample.tsv", help="sentence1/sentence2/score")
    parser.add_argument("--model", default=None, help="start model (default: all-MiniLM-L6-v2)")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--max-steps", type=int, default=None, help="default: one epoch")
    args = parser.parse_args()

    encoder = SentenceEncoder.load(args.model, precision="fp32")  # trained: fp32 weights
    train = read_nli(args.nli)
    sts = read_scored_pairs(args.sts)
    evaluator = STSEvaluator([r.texts[0] for r in sts], [r.texts[1] for r in sts], [float(r.label or 0) for r in sts])
    print(f"start: STS Spearman {evaluator(encoder)['spearman']:.2f}")

    loss = SoftmaxLoss(encoder)  # concat(u, v, |u - v|) -> 3 classes, as in the SBERT paper
    config = TrainingConfig(max_steps=args.max_steps, show_progress_bar=True)  # batch 16, lr 2e-5, 10 % warm-up
    result = Trainer(encoder, [(loss, train)], config, evaluator=evaluator, output_dir=args.output).fit()
    print(f"end: STS Spearman {result.best_metric:.2f} (best, step {result.best_step} of {result.steps})")

    # The saved folder loads in sbert-qdrant and sentence-transformers; its softmax head predicts NLI labels.
    head = SoftmaxLoss.load_head(SentenceEncoder.load(args.output), args.output)
    print(head.predict(["A man is playing a guitar on stage."], ["Nobody is playing music."]))


if __name__ == "__main__":
    main()
