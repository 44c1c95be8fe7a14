"""Cross-encoder vs bi-encoder, measured in one run: the Sentence-BERT paper's trade-off, and re-ranking.

1. STS-B. A cross-encoder trained from the default model's weights (all-MiniLM-L6-v2 under a fresh one-score head,
   ``CrossEncoderMSELoss`` on STS-B train) vs the bi-encoder (the default model itself, cosine) on STS-B dev:
   Spearman of each (target: cross-encoder >= bi-encoder + 1.5 points); pairs/s of the cross-encoder vs
   sentences/s of the bi-encoder on the dev texts; and the paper's headline from these speeds: the time to find the
   most similar pair among 10,000 real sentences -- the cross-encoder must score n(n-1)/2 pairs (computed from its
   measured pairs/s), the bi-encoder embeds each sentence once (``upsert_texts``) and compares vectors
   (``mine_duplicates``), measured end to end (target <= 10 s on this 2-core CPU).
   Training data: the 5,749 gold STS-B train pairs plus ``--sts-silver`` silver pairs of STS-B train sentences (each
   with one of its 30 nearest train sentences, or 30 % of the time a random one) labelled by the bi-encoder -- its
   cosine mapped to the gold 0..1 scale as the gold train pairs' cosines map to their scores. The cross-encoder
   reads the pair at once but starts from weights trained for cosine; the silver pairs hand it the bi-encoder's
   judgement (distillation, as Augmented SBERT does the other way round). Measured on dev, from the same start:
   gold alone plateaus at ~86.5 (below the bi-encoder), gold + silver reaches ~88.4. ``--sts-silver 0``: gold alone.
2. Quora. Pairs whose id is divisible by 5 are held out (the slice ``_data.read_quora_duplicate_probes`` probes
   with); a cross-encoder starts from the default model's weights and trains on the rest. ``--quora-objective
   listwise`` (default): ``--quora-groups`` groups (question, its duplicate, ``--quora-negatives`` of its 10 nearest
   questions by the bi-encoder outside its duplicate cluster), ``CrossEncoderListwiseLoss``. ``binary``:
   ``CrossEncoderBCELoss`` on ``--quora-train`` labelled pairs, plus ``--quora-silver`` silver pairs (as in part 1)
   and ``--quora-hard-negatives`` pairs labelled 0 per question. Prototype runs on the same 1,000 probes
   (not tuned on the probes): pointwise BCE re-ranked to 83.2 and listwise to 85.4 MRR@10 against 87.5 for retrieval
   alone; blending the two scores (z-scored, RRF) stayed within +0.4 of retrieval alone. The default model was
   trained on Quora duplicates among its billion pairs, which a cross-encoder from a few thousand groups does not
   catch up with on this CPU.
   Pair classification on the held-out pairs: AP / F1 of the cross-encoder's score vs the bi-encoder's cosine.
   Retrieve and re-rank: the questions of all held-out duplicate pairs are indexed in a TextCollection; for
   ``--probes`` of those pairs ``search_text`` finds the other questions for one question, alone and with
   ``rerank=cross_encoder, rerank_candidates=--candidates``; MRR@10 of its partner (target: +2 points).

Trained models are saved under ``--output`` (``stsb-cross-encoder/``, ``quora-cross-encoder/``); ``--reuse`` loads
them from there instead of training again. Speeds are only comparable within a run (the CPU is printed with each).

    python benchmarks/cross_encoder.py --data ../shared/data [--output DIR] [--reuse] [--quick] [--parts sts quora]

Training takes most of the time (3 epochs of 17,749 STS-B pairs, ~35-100 pairs/s on 2 cores); train once with
``--output DIR``, then measure with ``--output DIR --reuse``.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _data import cpu_summary, mrr_at_10, read_corpus, read_quora_duplicate_probes, read_quora_pairs

from sbert_qdrant import CrossEncoder, SentenceEncoder, TextCollection
from sbert_qdrant.training import (
    CrossEncoderBCELoss,
    CrossEncoderListwiseLoss,
    CrossEncoderMSELoss,
    Example,
    Objective,
    PairClassificationEvaluator,
    STSEvaluator,
    Trainer,
    TrainingConfig,
    read_scored_pairs,
)

#: The paper's figure for the 10,000-sentence most-similar-pair search with BERT as a cross-encoder (V100 GPU).
PAPER_CROSS_ENCODER_HOURS = 65
STS_TARGET = 1.5
MRR_TARGET = 2.0


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


def train(
    cross_encoder: CrossEncoder, objective: Objective, examples: list[Example], config: TrainingConfig, folder: Path
) -> None:
    result = Trainer(cross_encoder, [(objective, examples)], config, output_dir=folder).fit()
    print(
        f"  trained {result.steps} steps on {len(examples)} examples ({config.epochs} epochs, "
        f"batch {config.batch_size}, "
        f"lr {config.learning_rate:g}, precision {config.precision}): {result.train_seconds:.0f} s, "
        f"{result.examples_per_second:.1f} examples/s; loss {np.mean(result.losses[:50]):.4f} -> "
        f"{np.mean(result.losses[-50:]):.4f} (first / last 50 steps) -> {folder}",
        flush=True,
    )


def trained(
    folder: Path,
    reuse: bool,
    objective_class: type[Objective],
    examples: Callable[[], list[Example]],
    config: TrainingConfig,
) -> CrossEncoder:
    """The cross-encoder saved in ``folder`` (with --reuse), else a new one from the default model, trained."""
    if reuse and (folder / "config.json").is_file():
        print(f"  reusing the cross-encoder in {folder}")
        return CrossEncoder.load(folder, device="cpu")
    cross_encoder = CrossEncoder.from_transformer(device="cpu", seed=config.seed)
    train(cross_encoder, objective_class(cross_encoder), examples(), config, folder)
    return CrossEncoder.load(folder, device="cpu")  # the saved model, at the default precision (auto)


def silver_pairs(bi: SentenceEncoder, gold: list[Example], count: int, seed: int) -> list[Example]:
    """``count`` pairs of the gold pairs' texts, each text with one of its 30 nearest (70 %) or a random other text,
    labelled by the bi-encoder: its cosine mapped to the gold labels' scale, as the gold pairs' cosines map to their
    labels (mean label in 20 equal-count bins of cosine, interpolated, kept monotone)."""
    texts = sorted({text for example in gold for text in example.texts})
    vectors = np.asarray(bi.encode(texts, batch_size=64, normalize=True, show_progress_bar=False))
    index = {text: i for i, text in enumerate(texts)}
    cosine = np.array([vectors[index[e.texts[0]]] @ vectors[index[e.texts[1]]] for e in gold])
    labels = np.array([float(e.label or 0) for e in gold])
    bins = np.array_split(np.argsort(cosine), 20)
    x = [float(cosine[b].mean()) for b in bins]
    y = np.maximum.accumulate([float(labels[b].mean()) for b in bins])
    rng = random.Random(seed)
    anchors = [rng.randrange(len(texts)) for _ in range(count)]
    silver = []
    for start in range(0, count, 1024):  # bounded memory for the similarity block
        block = anchors[start : start + 1024]
        scores = vectors[block] @ vectors.T
        for row, i in zip(scores, block, strict=True):
            row[i] = -np.inf
            j = int(np.argsort(-row)[rng.randrange(30)]) if rng.random() < 0.7 else rng.randrange(len(texts))
            silver.append(Example((texts[i], texts[j]), float(np.interp(vectors[i] @ vectors[j], x, y))))
    return silver


def duplicate_clusters(gold: list[Example]) -> dict[str, str]:
    """Each text of ``gold`` -> a representative of its duplicate cluster (labelled duplicates, transitively)."""
    parent = {text: text for example in gold for text in example.texts}

    def root(text: str) -> str:
        while parent[text] != text:
            parent[text] = parent[parent[text]]
            text = parent[text]
        return text

    for example in gold:
        if example.label == 1:
            parent[root(example.texts[0])] = root(example.texts[1])
    return {text: root(text) for text in parent}


def nearest_non_duplicates(bi: SentenceEncoder, gold: list[Example], pool: int) -> dict[str, list[str]]:
    """For each question of a duplicate pair in ``gold``: its ``pool`` nearest texts of ``gold`` by the bi-encoder
    outside its duplicate cluster (the hard negatives a search would put above the partner)."""
    texts = sorted({text for example in gold for text in example.texts})
    vectors = np.asarray(bi.encode(texts, batch_size=64, normalize=True, show_progress_bar=False))
    cluster = duplicate_clusters(gold)
    index = {text: i for i, text in enumerate(texts)}
    queries = sorted({index[text] for e in gold if e.label == 1 for text in e.texts})
    nearest: dict[str, list[str]] = {}
    for start in range(0, len(queries), 1024):  # bounded memory for the similarity block
        block = queries[start : start + 1024]
        for row, i in zip(vectors[block] @ vectors.T, block, strict=True):
            order = np.argsort(-row)[: 2 * pool + 10]
            outside = [texts[j] for j in order if cluster[texts[j]] != cluster[texts[i]]]
            nearest[texts[i]] = outside[:pool]
    return nearest


def hard_negatives(bi: SentenceEncoder, gold: list[Example], per_positive: int, seed: int) -> list[Example]:
    """For each question q of a duplicate pair in ``gold``: ``per_positive`` pairs (q, n) labelled 0, n drawn from the
    10 questions nearest to q by the bi-encoder that are not known duplicates of q."""
    rng = random.Random(seed)
    return [
        Example((query, text), 0)
        for query, nearest in nearest_non_duplicates(bi, gold, 10).items()
        for text in rng.sample(nearest, min(per_positive, len(nearest)))
    ]


def listwise_groups(bi: SentenceEncoder, gold: list[Example], count: int, negatives: int, seed: int) -> list[Example]:
    """``count`` groups (q, p, n_1..n_k) for ``CrossEncoderListwiseLoss``: a duplicate pair of ``gold`` in either
    direction, with ``negatives`` of q's 10 nearest non-duplicates (what re-ranking must put below p)."""
    nearest = nearest_non_duplicates(bi, gold, 10)
    pairs = [e.texts for e in gold if e.label == 1]
    rng = random.Random(seed)
    directed = [(a, b) for a, b in pairs] + [(b, a) for a, b in pairs]
    rng.shuffle(directed)
    return [
        Example((query, partner, *rng.sample(nearest[query], negatives)))
        for query, partner in directed
        if len(nearest[query]) >= negatives
    ][:count]


def speeds(bi: SentenceEncoder, cross: CrossEncoder, pairs: list[tuple[str, str]], rounds: int) -> tuple[float, float]:
    """Sentences/s of the bi-encoder and pairs/s of the cross-encoder on the same pairs, batch 32, best of rounds."""
    sentences = [text for pair in pairs for text in pair]
    bi.encode(sentences[:64], show_progress_bar=False)  # warm-up, not timed
    cross.predict(pairs[:32], show_progress_bar=False)
    encode = min(timed(lambda: bi.encode(sentences, show_progress_bar=False))[1] for _ in range(rounds))
    predict = min(timed(lambda: cross.predict(pairs, show_progress_bar=False))[1] for _ in range(rounds))
    return len(sentences) / encode, len(pairs) / predict


def most_similar_pair(bi: SentenceEncoder, corpus: list[str], root: Path) -> tuple[float, float, Any]:
    """Seconds to embed and store ``corpus`` (``upsert_texts``) and to mine its most similar pair, and the pair."""
    with TextCollection("mine", bi, location=root / "mine", sparse=None, show_progress_bar=False) as coll:
        _, store = timed(lambda: coll.upsert_texts(corpus))
        pairs, mine = timed(lambda: coll.mine_duplicates(threshold=0.0, top_k=1, limit=1))
    return store, mine, pairs[0]


def sts_part(args: argparse.Namespace, bi: SentenceEncoder, root: Path) -> None:
    data, output = args.data, args.output
    gold = read_scored_pairs(data / "stsb" / "stsb_train.tsv.gz")
    dev = read_scored_pairs(data / "stsb" / "stsb_dev.tsv.gz")
    if args.quick:
        gold, dev = gold[:64], dev[:200]
    print(f"\n== 1. STS-B: cross-encoder vs bi-encoder on {len(dev)} dev pairs ==")

    def examples() -> list[Example]:
        silver = silver_pairs(bi, gold, 64 if args.quick else args.sts_silver, args.seed) if args.sts_silver else []
        print(f"  training pairs: {len(gold)} gold (STS-B train) + {len(silver)} silver")
        return gold + silver

    config = TrainingConfig(
        epochs=args.sts_epochs,
        batch_size=args.batch_size,
        learning_rate=args.sts_lr,
        precision=args.train_precision,
        seed=args.seed,
        max_steps=2 if args.quick else None,
    )
    cross = trained(output / "stsb-cross-encoder", args.reuse, CrossEncoderMSELoss, examples, config)
    evaluator = STSEvaluator([e.texts[0] for e in dev], [e.texts[1] for e in dev], [float(e.label or 0) for e in dev])
    bi_metrics, cross_metrics = evaluator(bi), evaluator(cross)
    gain = cross_metrics["spearman"] - bi_metrics["spearman"]
    print(f"{'STS-B dev':50}{'Spearman':>9}{'Pearson':>9}")
    for label, metrics in (
        ("bi-encoder (all-MiniLM-L6-v2, cosine)  (anchor)", bi_metrics),
        ("cross-encoder (its weights, STS-B train)", cross_metrics),
    ):
        print(f"{label:50}{metrics['spearman']:9.2f}{metrics['pearson']:9.2f}")
    verdict = "met" if gain >= STS_TARGET else "NOT met"
    print(f"cross-encoder - bi-encoder: {gain:+.2f} Spearman points (target >= +{STS_TARGET}): {verdict}")

    pairs = [(e.texts[0], e.texts[1]) for e in dev]
    n = 200 if args.quick else args.mine_sentences
    corpus = read_corpus(data, n)
    print(f"\nspeed on {cpu_summary()}; batch 32, best of {args.rounds} rounds:")
    print(f"{'precision':10}{'bi-encoder sentences/s':>24}{'cross-encoder pairs/s':>23}{'ratio':>8}")
    for precision in args.speed_precisions:
        bi_at = SentenceEncoder.load(device="cpu", precision=precision)
        cross_at = CrossEncoder.load(output / "stsb-cross-encoder", device="cpu", precision=precision)
        sentences_per_s, pairs_per_s = speeds(bi_at, cross_at, pairs, args.rounds)
        print(f"{precision:10}{sentences_per_s:24.1f}{pairs_per_s:23.1f}{sentences_per_s / pairs_per_s:7.2f}x")
        comparisons = n * (n - 1) // 2
        store, mine, best = most_similar_pair(bi_at, corpus, root / precision)
        hours = comparisons / pairs_per_s / 3600
        print(f"  most similar pair among {n:,} real sentences ({comparisons:,} pairs):")
        print(
            f"    cross-encoder, computed at {pairs_per_s:.1f} pairs/s: {hours:,.1f} hours "
            f"(paper: ~{PAPER_CROSS_ENCODER_HOURS} hours on a V100)"
        )
        total = store + mine
        target = "met" if total <= 10 else "NOT met"
        print(
            f"    bi-encoder, measured: upsert_texts {store:.2f} s + mine_duplicates {mine:.2f} s = {total:.2f} s "
            f"(target <= 10 s: {target}); {hours * 3600 / total:,.0f}x faster"
        )
        print(f"    found ({best.score:.4f}): {best.text_a!r} ~ {best.text_b!r}")


def quora_split(data: Path, seed: int) -> tuple[list[Example], list[Example]]:
    """Training pairs (id not divisible by 5, shuffled with ``seed``) and the held-out pairs."""
    train_pairs, held_out = [], []
    for row in read_quora_pairs(data / "quora" / "quora_pairs_train.jsonl.gz"):
        example = Example((str(row["question1"]), str(row["question2"])), int(row["is_duplicate"]))  # type: ignore[call-overload]
        (held_out if int(row["id"]) % 5 == 0 else train_pairs).append(example)  # type: ignore[call-overload]
    random.Random(seed).shuffle(train_pairs)
    return train_pairs, held_out


def rankings(
    bi: SentenceEncoder,
    cross: CrossEncoder | None,
    probes: list[tuple[str, str]],
    questions: list[str],
    depth: int,
    root: Path,
) -> tuple[list[list[str]], float]:
    """Each probe's 10 best other questions by ``search_text`` -- re-ranked from its top ``depth`` by ``cross`` unless
    None -- and the seconds per query."""
    found = []
    with TextCollection("quora", bi, location=root / "quora", sparse=None, show_progress_bar=False) as coll:
        coll.upsert_texts(questions)
        coll.optimize()
        start = time.perf_counter()
        for query, _ in probes:  # the query is in the collection: ask for one more, then leave it out
            hits = coll.search_text(query, limit=11, rerank=cross, rerank_candidates=depth + 1)
            found.append([text for text in (h.text or "" for h in hits) if text != query][:10])
        seconds = (time.perf_counter() - start) / len(probes)
    return found, seconds


def quora_examples(args: argparse.Namespace, bi: SentenceEncoder, train_pairs: list[Example]) -> list[Example]:
    """The training examples of ``--quora-objective`` (see the module docstring)."""
    if args.quora_objective == "listwise":
        groups = listwise_groups(bi, train_pairs, 16 if args.quick else args.quora_groups, args.quora_negatives, 0)
        print(f"  training groups: {len(groups)} (query, duplicate, {args.quora_negatives} hard negatives)")
        return groups
    sample = train_pairs[: 64 if args.quick else args.quora_train]
    silver = silver_pairs(bi, sample, 64 if args.quick else args.quora_silver, args.seed) if args.quora_silver else []
    hard = hard_negatives(bi, sample, args.quora_hard_negatives, args.seed) if args.quora_hard_negatives else []
    print(f"  training pairs: {len(sample)} gold + {len(silver)} silver + {len(hard)} hard negatives")
    return sample + silver + hard


def quora_part(args: argparse.Namespace, bi: SentenceEncoder, root: Path) -> None:
    train_pairs, held_out = quora_split(args.data, args.seed)
    if args.quick:
        train_pairs, held_out = train_pairs[:400], held_out[:200]
    print(f"\n== 2. Quora: {len(held_out)} held-out pairs (ids divisible by 5) ==")
    listwise = args.quora_objective == "listwise"
    config = TrainingConfig(
        epochs=1,
        batch_size=args.quora_group_batch if listwise else args.batch_size,
        learning_rate=args.quora_lr or (3e-5 if listwise else 5e-5),
        precision=args.train_precision,
        seed=args.seed,
        max_steps=2 if args.quick else None,
    )
    objective = CrossEncoderListwiseLoss if listwise else CrossEncoderBCELoss
    folder = args.output / "quora-cross-encoder"
    cross = trained(folder, args.reuse, objective, lambda: quora_examples(args, bi, train_pairs), config)
    evaluator = PairClassificationEvaluator(
        [e.texts[0] for e in held_out], [e.texts[1] for e in held_out], [int(e.label or 0) for e in held_out]
    )
    bi_metrics, cross_metrics = evaluator(bi), evaluator(cross)
    print(f"{'held-out pair classification':40}{'AP':>8}{'F1':>8}{'accuracy':>10}")
    for label, metrics in (("bi-encoder (cosine)  (anchor)", bi_metrics), ("cross-encoder (score)", cross_metrics)):
        print(f"{label:40}{metrics['ap']:8.2f}{metrics['f1']:8.2f}{metrics['accuracy']:10.2f}")
    print(
        f"cross-encoder - bi-encoder: AP {cross_metrics['ap'] - bi_metrics['ap']:+.2f}, "
        f"F1 {cross_metrics['f1'] - bi_metrics['f1']:+.2f} points"
    )
    retrieve_and_rerank(args, bi, cross, root)


def retrieve_and_rerank(args: argparse.Namespace, bi: SentenceEncoder, cross: CrossEncoder, root: Path) -> None:
    """MRR@10 of each probe's partner: ``search_text`` alone vs ``search_text(rerank=cross)``."""
    probes, questions = read_quora_duplicate_probes(args.data, 50 if args.quick else None)
    probes = probes[: args.probes]
    depth = args.candidates
    print(
        f"\nretrieve and re-rank: the {len(questions)} questions of the held-out duplicate pairs indexed; for "
        f"{len(probes)} of those pairs, search_text for one question (itself left out), alone and with "
        f"rerank=cross-encoder ({cross.precision}), rerank_candidates={depth}; MRR@10 of its partner"
    )
    alone, search_s = rankings(bi, None, probes, questions, depth, root)
    reranked, rerank_s = rankings(bi, cross, probes, questions, depth, root)
    before, after = 100 * mrr_at_10(alone, probes), 100 * mrr_at_10(reranked, probes)
    print(f"{'search_text (bi-encoder)':44}MRR@10 {before:6.2f}   (anchor)")
    print(f"{'search_text(rerank=cross-encoder)':44}MRR@10 {after:6.2f}   {after - before:+.2f}")
    verdict = "met" if after - before >= MRR_TARGET else "NOT met"
    print(f"re-ranking the top {depth}: {after - before:+.2f} MRR@10 points (target >= +{MRR_TARGET}): {verdict}")
    print(f"(per query: {1000 * search_s:.1f} ms alone, {1000 * rerank_s:.1f} ms with re-ranking; {cpu_summary()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the shared data folder (stsb/, quora/, nli/)")
    parser.add_argument("--output", type=Path, default=None, help="where trained models go (default: a temp dir)")
    parser.add_argument("--reuse", action="store_true", help="load the models already in --output, do not train")
    parser.add_argument("--quick", action="store_true", help="a smoke run: a few steps, small slices")
    parser.add_argument("--parts", nargs="+", choices=("sts", "quora"), default=["sts", "quora"])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--sts-epochs", type=int, default=3)
    parser.add_argument("--sts-lr", type=float, default=5e-5)
    parser.add_argument("--sts-silver", type=int, default=12_000, help="silver pairs scored by the bi-encoder")
    parser.add_argument("--quora-objective", choices=("listwise", "binary"), default="listwise")
    parser.add_argument("--quora-groups", type=int, default=8000, help="listwise: training groups")
    parser.add_argument("--quora-negatives", type=int, default=7, help="listwise: hard negatives per group")
    parser.add_argument("--quora-group-batch", type=int, default=8, help="listwise: groups per batch")
    parser.add_argument("--quora-train", type=int, default=10_000, help="binary: gold pairs sampled from the file")
    parser.add_argument(
        "--quora-silver", type=int, default=10_000, help="binary: silver pairs scored by the bi-encoder"
    )
    parser.add_argument("--quora-hard-negatives", type=int, default=0, help="binary: per question (hard_negatives)")
    parser.add_argument("--quora-lr", type=float, default=None, help="default: 3e-5 listwise, 5e-5 binary")
    parser.add_argument("--train-precision", default="auto", choices=("auto", "fp32", "bf16"))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--speed-precisions", nargs="+", default=["auto", "fp32"], choices=("auto", "fp32", "bf16", "int8")
    )
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds (best of)")
    parser.add_argument("--mine-sentences", type=int, default=10_000)
    parser.add_argument("--probes", type=int, default=1000, help="held-out duplicate pairs to re-rank for")
    parser.add_argument("--candidates", type=int, default=50, help="hits of search_text the cross-encoder re-ranks")
    args = parser.parse_args()
    if args.quick:
        args.rounds = 1
    print(f"CPU: {cpu_summary()}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        args.output = args.output or root / "models"
        bi = SentenceEncoder.load(device="cpu")
        if "sts" in args.parts:
            sts_part(args, bi, root)
        if "quora" in args.parts:
            quora_part(args, bi, root)
        print(f"\ntrained models: {args.output}" + (" (a temp dir, deleted now)" if args.output.parent == root else ""))


if __name__ == "__main__":
    main()
