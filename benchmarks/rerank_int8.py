"""A re-rank stage for CPUs: a cross-encoder's fp32 vs static int8 (certified by ``certify_int8``) in one run, on a
small SciFact sample: latency per query at k candidates, and nDCG@10 of the re-ranked order (alone and blended at
``rerank_weight=0.25``) beside the retrieval's, plus the int8 order's agreement with fp32's.

The cross-encoder is trained briefly from the default model (listwise, one epoch over ``--train-claims`` claims,
their positive and 3 hard negatives from the hybrid top k): a quick stand-in for a trained re-ranker, not one.
Calibration pairs are its training pairs; the exact-grade check runs on ``--certify-claims`` other train claims'
candidate groups; latency and quality on ``--eval-claims`` dev claims (the hash split of benchmarks/adapt.py).

Variants, scored alternately query by query (so that a busy CPU's load falls on all alike) and each compared with
fp32 at ``--tokens``: ``fp32``; ``auto`` (static int8 where certified); ``int8-before`` (``auto`` scored as predict
ran before issue 55's CPU pass: one batch of all k pairs on all threads, the last layer for every token; tokenized
as now); ``auto-<N>`` (``auto`` with pairs cut at N tokens: ``load(max_seq_length=N)``, an explicit option).

    cd benchmarks && python rerank_int8.py --data ../../shared/data --output OUT
    cd benchmarks && python rerank_int8.py --data ../../shared/data --reuse OUT/reranker   # no training
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _data import cpu_summary
from adapt import is_dev, quiet_library_logs, read_corpus, read_split

import sbert_qdrant.encoder.cross_encoder as cross_module
from sbert_qdrant import CrossEncoder, SentenceEncoder, TextCollection
from sbert_qdrant._collection.search import blended_scores
from sbert_qdrant.encoder.cross_int8 import certify_int8, order_agreement
from sbert_qdrant.training import CrossEncoderListwiseLoss, Example, Trainer, TrainingConfig


def ndcg10(ranked: list[str], relevant: set[str]) -> float:
    dcg = sum(1 / math.log2(r + 2) for r, d in enumerate(ranked[:10]) if d in relevant)
    ideal = sum(1 / math.log2(r + 2) for r in range(min(len(relevant), 10)))
    return 100 * dcg / ideal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument(
        "--docs", type=int, default=600, help="corpus: the first N abstracts plus those judged for the claims used"
    )
    parser.add_argument("--train-claims", type=int, default=64)
    parser.add_argument("--certify-claims", type=int, default=20)
    parser.add_argument("--eval-claims", type=int, default=40)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument(
        "--reuse", type=Path, default=None, help="a re-ranker folder (with its int8 ranges): no training"
    )
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--batch-size", type=int, default=4, help="training groups per step")
    parser.add_argument("--train-precision", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument(
        "--variants", default="fp32,auto,int8-before,auto-192,auto-128", help="comma-separated; see the docstring"
    )
    args = parser.parse_args()
    quiet_library_logs()
    folder = args.data / "scifact"
    whole = read_corpus(folder / "corpus.jsonl.gz", None)
    queries, qrels = read_split(folder / "queries_train.jsonl", folder / "qrels" / "train.tsv", set(whole.ids))
    train = [q for q in queries if not is_dev(q)]
    dev = [q for q in queries if is_dev(q)][: args.eval_claims]
    fit, certify = train[: args.train_claims], train[args.train_claims : args.train_claims + args.certify_claims]
    judged = {d for q in fit + certify + dev for d in qrels[q]}
    keep = [i for i, d in enumerate(whole.ids) if i < args.docs or d in judged]
    ids, texts = [whole.ids[i] for i in keep], [whole.texts[i] for i in keep]
    print(f"# {cpu_summary()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"corpus {len(ids)} abstracts; claims: {len(fit)} train, {len(certify)} certify, {len(dev)} eval; k {args.k}")
    timings: dict[str, float] = {}
    start = time.perf_counter()
    encoder = SentenceEncoder.load(max_seq_length=args.tokens)
    by_id = dict(zip(ids, texts, strict=True))
    with TextCollection("scifact", encoder, location=tempfile.mkdtemp(), show_progress_bar=False) as coll:
        coll.upsert_texts(texts, ids=ids)
        asked = fit + certify + dev
        hits = coll.search_texts([queries[q] for q in asked], limit=args.k, mode="hybrid")
    found = {q: [(str(h.id), h.score) for h in row] for q, row in zip(asked, hits, strict=True)}
    timings["index + retrieve"] = time.perf_counter() - start

    if args.reuse is not None:
        out = args.reuse
        print(f"reused {out}: no training, its certified ranges")
    else:
        out = train_and_certify(args, fit, certify, found, qrels, queries, by_id, timings)
    variants = args.variants.split(",")
    models = {name: load_variant(out, name) for name in variants}
    auto = models.get("auto") or CrossEncoder.load(out, device="cpu", precision="auto")
    print(f"load(precision='auto') here: {auto.precision} ({auto.int8_mode})")

    latency: dict[str, list[float]] = {name: [] for name in models}
    alone: dict[str, list[float]] = {name: [] for name in models}
    blend: dict[str, list[float]] = {name: [] for name in models}
    scored: dict[str, list[np.ndarray]] = {name: [] for name in models}
    warm = [(queries[dev[0]], by_id[d]) for d, _ in found[dev[0]]]
    for name, model in models.items():
        score(name, model, warm)
    print(f"# before: {Path('/proc/loadavg').read_text().strip()} (load average)")
    for q in dev:
        docs = [d for d, _ in found[q]]
        pairs = [(queries[q], by_id[d]) for d in docs]
        for name, model in models.items():
            t0 = time.perf_counter()
            scores = score(name, model, pairs)
            latency[name].append(1000 * (time.perf_counter() - t0))
            alone[name].append(ndcg10([docs[i] for i in np.argsort(-scores, kind="stable")], qrels[q]))
            mixed = np.asarray(blended_scores(scores.tolist(), [s for _, s in found[q]], 0.25))
            blend[name].append(ndcg10([docs[i] for i in np.argsort(-mixed, kind="stable")], qrels[q]))
            scored[name].append(scores)
    print(f"# after: {Path('/proc/loadavg').read_text().strip()} (load average)")
    summary: dict[str, object] = {}
    anchor = "fp32" if "fp32" in models else variants[0]
    print(
        f"{'variant':<12} {'ms median':>9} {'ms mean':>8} {'nDCG@10 alone':>13} {'blend 0.25':>10} {'loss vs fp32':>12}"
    )
    for name in models:
        loss = 100 * (1 - statistics.fmean(map(order_agreement, scored[anchor], scored[name])))
        figures = {
            "ms_median": statistics.median(latency[name]),
            "ms_mean": statistics.fmean(latency[name]),
            "ndcg10_alone": statistics.fmean(alone[name]),
            "ndcg10_blend025": statistics.fmean(blend[name]),
            "agreement_loss": loss,
        }
        print(
            f"{name:<12} {figures['ms_median']:>9.1f} {figures['ms_mean']:>8.1f} {figures['ndcg10_alone']:>13.2f} "
            f"{figures['ndcg10_blend025']:>10.2f} {loss:>12.3f}"
        )
        summary |= {f"{name}_{key}": round(value, 3) for key, value in figures.items()}
    summary["retrieval_ndcg10"] = round(statistics.fmean(ndcg10([d for d, _ in found[q]], qrels[q]) for q in dev), 3)
    summary["auto_precision"] = f"{auto.precision} ({auto.int8_mode})"
    if "fp32" in models and "auto" in models:
        summary["speedup"] = round(summary["fp32_ms_median"] / summary["auto_ms_median"], 2)  # type: ignore[operator]
    summary |= {f"seconds_{k}": round(v, 1) for k, v in timings.items()}
    print(json.dumps(summary))


def load_variant(folder: Path, name: str) -> CrossEncoder:
    """fp32, auto, int8-before (auto, scored as before issue 55's CPU pass) or auto-<tokens>."""
    if name == "fp32":
        return CrossEncoder.load(folder, device="cpu", precision="fp32")
    if name in ("auto", "int8-before"):
        return CrossEncoder.load(folder, device="cpu", precision="auto")
    if name.startswith("auto-"):
        return CrossEncoder.load(folder, device="cpu", precision="auto", max_seq_length=int(name[5:]))
    raise SystemExit(f"unknown variant {name!r}")


def score(name: str, model: CrossEncoder, pairs: list[tuple[str, str]]) -> np.ndarray:
    """The re-rank's scores; ``int8-before`` runs one batch of all pairs on all threads with every token through the
    last layer, as predict did before (the first-token hook is never installed for it)."""
    if name != "int8-before":
        return np.asarray(model.predict(pairs, batch_size=32), dtype=np.float64).ravel()
    rows, first = cross_module.cpu_batch_rows, cross_module.first_token_only
    cross_module.cpu_batch_rows = lambda _pairs, batch_size: batch_size
    cross_module.first_token_only = lambda _model: None
    try:
        return np.asarray(model.predict(pairs, batch_size=32), dtype=np.float64).ravel()
    finally:
        cross_module.cpu_batch_rows, cross_module.first_token_only = rows, first


def train_and_certify(
    args: argparse.Namespace,
    fit: list[str],
    certify: list[str],
    found: dict[str, list[tuple[str, float]]],
    qrels: dict[str, set[str]],
    queries: dict[str, str],
    by_id: dict[str, str],
    timings: dict[str, float],
) -> Path:
    """A cross-encoder from the default model trained listwise on ``fit`` claims, certified on ``certify`` claims'
    candidate groups and saved with its ranges under ``--output``."""
    groups = []
    for q in fit:
        negatives = [d for d, _ in found[q] if d not in qrels[q]][:3]
        if len(negatives) == 3:
            positive = by_id[sorted(qrels[q])[0]]
            groups.append(Example((queries[q], positive, *(by_id[d] for d in negatives))))
    start = time.perf_counter()
    cross = CrossEncoder.from_transformer(device="cpu", max_seq_length=args.tokens)
    config = TrainingConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        precision=args.train_precision,
        show_progress_bar=False,
    )
    result = Trainer(cross, [(CrossEncoderListwiseLoss(cross), groups)], config).fit()
    timings["train"] = time.perf_counter() - start
    print(
        f"trained: {len(groups)} groups, {result.steps} steps; loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}"
    )

    calibration = [(e.texts[0], t) for e in groups for t in e.texts[1:]]
    start = time.perf_counter()
    check = certify_int8(cross, calibration, [(queries[q], [by_id[d] for d, _ in found[q]]) for q in certify])
    timings["certify"] = time.perf_counter() - start
    print(check.report())
    out = Path(args.output or tempfile.mkdtemp()) / "reranker"
    cross.save(out)
    return out


if __name__ == "__main__":
    main()
