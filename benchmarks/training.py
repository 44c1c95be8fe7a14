"""Fine-tuning benchmarks: parity with sentence-transformers' trainer, NLI from a weak start, pooling, Quora.

Parts (``--parts``, default all):
  parity   same start model (all-MiniLM-L6-v2), NLI pairs, SoftmaxLoss, seed and hyperparameters for a fixed
           number of steps, sentence-transformers' SentenceTransformerTrainer then ours: STS-B dev Spearman and
           training throughput (pairs/s, wall clock and per CPU-second), with ratios.
  weak     a weak start: all-MiniLM-L6-v2 with every transformer layer re-initialised (word and position
           embeddings kept), softmax-NLI training; STS-B dev Spearman before and after, for mean / max / cls
           pooling on the same budget (the paper's pooling ablation).
  quora    all-MiniLM-L6-v2 fine-tuned with OnlineContrastiveLoss on Quora train pairs; AP / F1 / accuracy on
           a held-out slice of the shared Quora file before and after.

    nice -n 5 python benchmarks/training.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from sbert_qdrant import Pooling, SentenceEncoder
from sbert_qdrant.encoder.loading import resolve_model_folder
from sbert_qdrant.training import (
    Example,
    OnlineContrastiveLoss,
    PairClassificationEvaluator,
    SoftmaxLoss,
    STSEvaluator,
    Trainer,
    TrainingConfig,
    read_nli,
    read_scored_pairs,
)

NLI_FILES = (
    "snli_train_subset_cat.tsv.gz",
    "mnli_dev_matched.tsv.gz",
    "mnli_dev_mismatched.tsv.gz",
    "xnli_en_dev.tsv.gz",
    "xnli_en_test.tsv.gz",
    "cad_snli_train.tsv.gz",
)


def read_all_nli(data: Path) -> list[Example]:
    """The ~65k NLI pairs of the shared folder (SNLI dev has sentence1/sentence2 columns, the rest premise/...)."""
    examples = read_nli(data / "nli" / "snli_dev.tsv.gz", text_columns=("sentence1", "sentence2"))
    for name in NLI_FILES:
        examples += read_nli(data / "nli" / name)
    return examples


def sts_dev(data: Path) -> STSEvaluator:
    rows = read_scored_pairs(data / "stsb" / "stsb_dev.tsv.gz")
    return STSEvaluator([r.texts[0] for r in rows], [r.texts[1] for r in rows], [float(r.label or 0) for r in rows])


def timed(run: Callable[[], Any]) -> tuple[Any, float, float]:
    """Result, wall seconds and this process's CPU seconds of ``run()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def load_note() -> str:
    return "load avg {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _train_reference(folder: str, pairs: list[Example], steps: int, seed: int) -> tuple[Any, float, float, float]:
    """sentence-transformers' SoftmaxLoss + SentenceTransformerTrainer: model, wall s, CPU s, steady pairs/s."""
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer import losses

    model = SentenceTransformer(folder, device="cpu")
    loss = losses.SoftmaxLoss(model, model.get_embedding_dimension(), num_labels=3)
    used = pairs[: steps * 16]
    columns = {
        "sentence1": [e.texts[0] for e in used],
        "sentence2": [e.texts[1] for e in used],
        "label": [int(e.label or 0) for e in used],
    }
    with tempfile.TemporaryDirectory() as tmp:
        training_args = SentenceTransformerTrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=16,
            learning_rate=2e-5,
            warmup_steps=math.ceil(0.1 * steps),
            lr_scheduler_type="linear",
            weight_decay=0.01,
            max_grad_norm=1.0,
            max_steps=steps,
            seed=seed,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            use_cpu=True,
            dataloader_drop_last=False,
        )
        clock = _StepClock()
        trainer = SentenceTransformerTrainer(
            model=model, args=training_args, train_dataset=Dataset.from_dict(columns), loss=loss, callbacks=[clock]
        )
        _, wall, cpu = timed(trainer.train)
    model.eval()
    return model, wall, cpu, clock.pairs_per_second(16)


def _train_ours(
    folder: str, pairs: list[Example], steps: int, seed: int
) -> tuple[SentenceEncoder, float, float, float]:
    """Our SoftmaxLoss + Trainer with the same settings: encoder, wall s, CPU s, pairs/s inside steps."""
    encoder = SentenceEncoder.load(folder, device="cpu")
    config = TrainingConfig(max_steps=steps, batch_size=16, precision="fp32", seed=seed)
    result, wall, cpu = timed(Trainer(encoder, [(SoftmaxLoss(encoder), pairs[: steps * 16])], config).fit)
    return encoder, wall, cpu, result.examples_per_second


def parity(args: argparse.Namespace, nli: list[Example], sts: STSEvaluator) -> None:
    steps = args.parity_steps
    pairs = random.Random(args.seed).sample(nli, steps * 16)
    folder = str(resolve_model_folder(None))
    start = sts(SentenceEncoder.load(folder, device="cpu"))["spearman"]
    print(f"\n== parity: {steps} steps x batch 16 = {len(pairs)} NLI pairs, softmax, lr 2e-5, warm-up 10 %, seed")
    print(f"start STS-B dev Spearman (both): {start:.2f}")

    note_ref = load_note()
    reference, ref_wall, ref_cpu, ref_steady = _train_reference(folder, pairs, steps, args.seed)
    ref_sp = sts(_Reference(reference))["spearman"]  # type: ignore[arg-type]
    note_ours = load_note()
    ours, our_wall, our_cpu, our_steady = _train_ours(folder, pairs, steps, args.seed)
    our_sp = sts(ours)["spearman"]
    n = len(pairs)
    print(f"{'trainer':<34}{'STS-B dev':>10}{'pairs/s':>9}{'pairs/CPU-s':>13}{'steady':>8}{'wall s':>8}  load")
    for name, sp, wall, cpu, steady, note in (
        ("sentence-transformers (anchor)", ref_sp, ref_wall, ref_cpu, ref_steady, note_ref),
        ("sbert-qdrant Trainer", our_sp, our_wall, our_cpu, our_steady, note_ours),
    ):
        print(f"{name:<34}{sp:>10.2f}{n / wall:>9.2f}{n / cpu:>13.2f}{steady:>8.2f}{wall:>8.1f}  {note}")
    print(
        f"ours - reference: {our_sp - ref_sp:+.2f} Spearman points; throughput {ref_wall / our_wall:.2f}x wall, "
        f"{ref_cpu / our_cpu:.2f}x per CPU-second, {our_steady / ref_steady:.2f}x steady state"
    )
    # The machine is shared: more short runs, alternating which goes first, pair each timing with its neighbour.
    ratios = [our_steady / ref_steady]
    short = args.parity_timing_steps
    for r in range(1, args.parity_rounds):
        order = ("ours", "reference") if r % 2 else ("reference", "ours")
        rates = {}
        for who in order:
            run = _train_ours if who == "ours" else _train_reference
            rates[who] = run(folder, pairs, short, args.seed)[3]
        ratios.append(rates["ours"] / rates["reference"])
        print(
            f"timing round {r + 1} ({short} steps each, {order[0]} first): ours {rates['ours']:.2f}, "
            f"reference {rates['reference']:.2f} pairs/s = {ratios[-1]:.2f}x  {load_note()}"
        )
    print(f"steady-state throughput ratio, median of {len(ratios)} rounds: {statistics.median(ratios):.2f}x")


class _StepClock(TrainerCallback):
    """Times sentence-transformers' steps after the first 5 (start-up excluded)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.times.append(time.perf_counter())

    def pairs_per_second(self, batch: int) -> float:
        skip = min(5, len(self.times) - 2)
        return batch * (len(self.times) - 1 - skip) / (self.times[-1] - self.times[skip])


class _Reference:
    """Lets STSEvaluator (which calls ``encode``) score a sentence-transformers model."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def encode(self, texts: list[str], batch_size: int = 64, normalize: bool = True, **_: Any) -> Any:
        return self.model.encode(texts, batch_size=batch_size, normalize_embeddings=normalize)


def weak_encoder(mode: str, seed: int, layers: int, keep: int) -> SentenceEncoder:
    """all-MiniLM-L6-v2 cut to ``layers`` layers, all but the lowest ``keep`` freshly initialised (embeddings kept)."""
    encoder = SentenceEncoder.load(device="cpu")
    model = encoder.transformer.model
    model.encoder.layer = model.encoder.layer[:layers]
    model.config.num_hidden_layers = layers
    torch.manual_seed(seed)
    with torch.no_grad():  # BERT's own init: N(0, 0.02) weights, zero biases, unit LayerNorm
        for module in model.encoder.layer[keep:].modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(0.0, model.config.initializer_range)
                module.bias.zero_()
            elif isinstance(module, torch.nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
    return SentenceEncoder([encoder.transformer, Pooling(encoder.transformer.dimension, mode)], device="cpu")


def weak(args: argparse.Namespace, nli: list[Example], sts: STSEvaluator) -> None:
    steps, batch = args.weak_steps, 16
    print(
        f"\n== weak start: MiniLM embeddings + {args.weak_keep} pretrained and {args.weak_layers - args.weak_keep} "
        f"re-initialised layers, softmax-NLI {steps} steps "
        f"x batch {batch} (of {len(nli)} pairs), lr {args.weak_lr}, warm-up 10 %, max_seq_length {args.max_seq_length}"
    )
    print(f"{'pooling':<8}{'start':>8}{'end':>8}{'gain':>8}{'steps':>7}{'wall s':>8}{'pairs/s':>9}{'loss':>15}  load")
    for mode in args.pooling:
        encoder = weak_encoder(mode, args.seed, args.weak_layers, args.weak_keep)
        encoder.max_seq_length = args.max_seq_length
        start = sts(encoder)["spearman"]
        config = TrainingConfig(
            max_steps=steps,
            batch_size=batch,
            learning_rate=args.weak_lr,
            precision="fp32",
            seed=args.seed,
            eval_steps=args.weak_eval_steps,
        )
        note = load_note()
        trainer = Trainer(encoder, [(SoftmaxLoss(encoder), nli)], config, evaluator=sts)
        result, wall, _ = timed(trainer.fit)
        end = result.evaluations[-1][1]["spearman"]  # the trainer scores the last step
        window = min(50, len(result.losses))
        first, last = (sum(part) / window for part in (result.losses[:window], result.losses[-window:]))
        print(
            f"{mode:<8}{start:>8.2f}{end:>8.2f}{end - start:>+8.2f}{result.steps:>7}{wall:>8.1f}"
            f"{result.examples_per_second:>9.2f}{first:>7.3f}->{last:.3f}  {note}"
        )
        if args.weak_eval_steps:
            print("  STS-B dev by step: " + ", ".join(f"{s}: {m['spearman']:.2f}" for s, m in result.evaluations))


def read_quora(path: Path) -> tuple[list[Example], list[Example]]:
    """Train pairs and a held-out slice (1 in 10 pair ids by hash) of the shared Quora train file."""
    train, held_out = [], []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            example = Example((row["question1"], row["question2"]), int(row["is_duplicate"]))
            digest = int(hashlib.sha256(f"sbert-qdrant-eval:{row['id']}".encode()).hexdigest(), 16)
            (held_out if digest % 10 == 0 else train).append(example)
    return train, held_out


def quora(args: argparse.Namespace) -> None:
    train, held_out = read_quora(args.data / "quora" / "quora_pairs_train.jsonl.gz")
    held_out = held_out[: args.quora_eval]
    evaluator = PairClassificationEvaluator(
        [e.texts[0] for e in held_out], [e.texts[1] for e in held_out], [int(e.label or 0) for e in held_out]
    )
    encoder = SentenceEncoder.load(device="cpu")
    steps, batch = args.quora_steps, args.quora_batch
    print(
        f"\n== Quora: OnlineContrastiveLoss (margin 0.5), {steps} steps x batch {batch} from {len(train)} train pairs; "
        f"held-out slice {len(held_out)} pairs ({sum(int(e.label or 0) for e in held_out)} duplicates)"
    )
    before = evaluator(encoder)
    config = TrainingConfig(max_steps=steps, batch_size=batch, precision="fp32", seed=args.seed)
    note = load_note()
    _, wall, _ = timed(Trainer(encoder, [(OnlineContrastiveLoss(encoder), train)], config).fit)
    after = evaluator(encoder)
    print(f"{'metric':<12}{'before':>9}{'after':>9}{'change':>9}")
    for key in ("ap", "f1", "accuracy", "precision", "recall", "f1_threshold"):
        print(f"{key:<12}{before[key]:>9.2f}{after[key]:>9.2f}{after[key] - before[key]:>+9.2f}")
    print(f"training wall time {wall:.1f} s ({steps * batch / wall:.1f} pairs/s)  {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="folder with nli/, stsb/, quora/")
    parser.add_argument("--parts", nargs="+", default=["parity", "weak", "quora"], choices=("parity", "weak", "quora"))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--parity-steps", type=int, default=120)
    parser.add_argument("--parity-rounds", type=int, default=3, help="1 full run + timing-only rounds")
    parser.add_argument("--parity-timing-steps", type=int, default=40, help="steps of each timing-only round")
    parser.add_argument("--weak-steps", type=int, default=600)
    parser.add_argument("--weak-lr", type=float, default=1e-4, help="re-initialised layers need more than 2e-5")
    parser.add_argument("--weak-layers", type=int, default=6, help="re-initialised transformer layers (MiniLM: 6)")
    parser.add_argument("--weak-keep", type=int, default=0, help="lowest pretrained layers kept as they are")
    parser.add_argument("--weak-eval-steps", type=int, default=None, help="also score STS-B dev every N steps")
    parser.add_argument("--pooling", nargs="+", default=["mean", "max", "cls"])
    parser.add_argument("--max-seq-length", type=int, default=64, help="token limit in the weak-start runs")
    parser.add_argument("--quora-steps", type=int, default=300)
    parser.add_argument("--quora-batch", type=int, default=32)
    parser.add_argument("--quora-eval", type=int, default=2000, help="held-out pairs to score")
    args = parser.parse_args()
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} {load_note()}")
    sts = sts_dev(args.data)
    nli = read_all_nli(args.data) if {"parity", "weak"} & set(args.parts) else []
    started = time.perf_counter()
    if "parity" in args.parts:
        parity(args, nli, sts)
    if "weak" in args.parts:
        weak(args, nli, sts)
    if "quora" in args.parts:
        quora(args)
    print(f"\ntotal wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
