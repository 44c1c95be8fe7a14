"""Matryoshka vectors on BEIR SciFact: what each cut of a vector, a small first-stage slot re-scored by the full
vector, and each storage preset keep of retrieval quality, and what a short Matryoshka-loss fine-tune changes, in
one run.

1. Encode the corpus (5,183 abstracts, ``title + " " + text``; ``--corpus N``: the abstracts judged relevant to a
   measured or trained query and others picked by a hash of their id, N in all) with the base model
   (all-MiniLM-L6-v2, not trained as a Matryoshka model) once; every collection below is written from these
   vectors (``vectors=``) into Qdrant Edge, so each configuration costs a write, not an encoding.
2. Measure on the dev split (SciFact's train queries split by a hash of their id, as in ``adapt.py``), nDCG@10 and
   recall@100 (x100, dense searches of 100 hits) and the bytes one point's dense vectors take (computed: searched,
   what the first pass reads; stored, all of them), for: the full 384 float vector; the vector cut to each of
   ``--dims`` alone (``truncate_dim``); each first stage of those sizes re-scored by the full vector in the engine
   (``first_stage_dim=``, ``--candidates``: default the product's, 100); each storage preset (``quantization=``),
   as searched by default (codes oversampled, re-scored by the originals) and by its codes alone (``_raw``).
3. Mine hard negatives for the train split (``--train-queries N``: N of its queries) from a hybrid collection of
   the base vectors, fine-tune with ``MatryoshkaLoss(MultipleNegativesRankingLoss)`` over the full size and
   ``--dims`` (1 epoch, 128 tokens), encode the corpus again with the trained model, and measure step 2 again
   ("after"); with ``--control``, the same fine-tune with MNRL alone too ("control"), for the loss's own gain.

The corpus vectors, the mined file, the trained model and each model's figures are kept in ``--output`` (a re-run
reuses them).

    python benchmarks/matryoshka.py --data ../shared/data --output /tmp/mrl [--corpus 1500 --train-queries 300]
        [--control] [--dims 256,128,64] [--tokens 128] [--candidates N]

The last line is JSON: every figure, keyed ``<config>_<base|after|control>_<ndcg10|recall100>`` and
``<config>_bytes_<searched|stored>``, with the training's steps and seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _data import cpu_summary
from adapt import Corpus, quiet_library_logs, read_corpus, read_split, scores, train_dev
from qdrant_client import models

from sbert_qdrant import SentenceEncoder, TextCollection
from sbert_qdrant.store.base import STORAGE_PRESETS, searched_bytes
from sbert_qdrant.training import (
    MatryoshkaLoss,
    MiningGuards,
    MultipleNegativesRankingLoss,
    Trainer,
    TrainingConfig,
    mine_hard_negatives,
)
from sbert_qdrant.training.data import read_examples
from sbert_qdrant.types import QUANTIZATIONS


def _rank(key: str) -> str:
    return hashlib.sha256(f"matryoshka:{key}".encode()).hexdigest()


def sampled(corpus: Corpus, relevant: set[str], size: int | None) -> Corpus:
    """The abstracts judged relevant to a measured or trained query, and others (picked by a hash of their id) up
    to ``size`` in all: a smaller haystack where the CPU allows no more (None: the whole corpus)."""
    if size is None:
        return corpus
    others = sorted((d for d in corpus.ids if d not in relevant), key=_rank)
    keep = relevant | set(others[: max(0, size - len(relevant))])
    rows = [i for i, d in enumerate(corpus.ids) if d in keep]
    return Corpus([corpus.ids[i] for i in rows], [corpus.titles[i] for i in rows], [corpus.bodies[i] for i in rows])


def corpus_vectors(encoder: SentenceEncoder, corpus: Corpus, path: Path) -> np.ndarray:
    """The corpus's full vectors, encoded once and kept at ``path``."""
    if path.exists():
        return np.load(path)
    start = time.perf_counter()
    vectors = encoder.encode_document(corpus.texts, batch_size=32, show_progress_bar=True)
    np.save(path, vectors)
    print(f"encoded {len(vectors)} abstracts in {time.perf_counter() - start:.0f} s -> {path}")
    return np.asarray(vectors)


def mined_file(
    encoder: SentenceEncoder,
    corpus: Corpus,
    vectors: np.ndarray,
    train: dict[str, str],
    qrels: dict[str, set[str]],
    root: Path,
) -> Path:
    """Hard negatives for the train split from a hybrid collection of the base vectors (as ``adapt.py`` mines)."""
    path = root / "mined.jsonl"
    if path.exists():
        return path
    with TextCollection("mine", encoder, location=root / "edge", recreate=True) as coll:
        coll.upsert_texts(corpus.texts, ids=corpus.ids, vectors=list(vectors), vectors_from=encoder.identity)
        pairs = [(train[q], d) for q in train for d in sorted(qrels[q])]
        mined = mine_hard_negatives(
            coll, [q for q, _ in pairs], [d for _, d in pairs], num_negatives=1, guards=MiningGuards(2, 30)
        )
        mined.write(path)
        coll.delete_collection()
    print(f"mined {len(mined.examples)} examples ({len(mined.skipped)} skipped) -> {path}")
    return path


def fine_tune(args: argparse.Namespace, mined: Path, folder: Path, matryoshka: bool = True) -> dict[str, Any]:
    """MatryoshkaLoss(MNRL) over the full size and ``--dims`` (else MNRL alone: the control); the trained model
    saved in ``folder``."""
    summary = folder / "summary.json"
    if summary.exists():
        return dict(json.loads(summary.read_text()))
    encoder = SentenceEncoder.load(device="cpu", precision="fp32", max_seq_length=args.tokens)
    examples = read_examples(mined, ["query", "positive", "negative_1"])
    dims = [encoder.dimension, *args.dims]
    loss = MultipleNegativesRankingLoss(encoder)
    if matryoshka:
        loss = MatryoshkaLoss(loss, dims)
    config = TrainingConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        precision="fp32",
        batch_sampler="no_duplicates",
        show_progress_bar=True,
    )
    print(
        f"training: {type(loss).__name__} (dims {dims if matryoshka else 'full'}), {len(examples)} examples, {config}"
    )
    result = Trainer(encoder, [(loss, examples)], config, output_dir=folder).fit()
    figures = {"steps": result.steps, "train_seconds": round(result.train_seconds, 1), "dims": dims}
    summary.write_text(json.dumps(figures))
    print(f"trained {result.steps} steps in {result.train_seconds:.0f} s -> {folder}")
    return figures


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _collection_scores(
    name: str,
    encoder: SentenceEncoder,
    vectors: np.ndarray,
    corpus: Corpus,
    queries: dict[str, str],
    qrels: dict[str, set[str]],
    store: Path,
    search: dict[str, Any],
    **options: Any,
) -> tuple[float, float]:
    """(nDCG@10, recall@100) x100 of dense searches (``search``: their options) of a fresh Edge collection
    (``options``) written from ``vectors``."""
    with TextCollection(name, encoder, location=store, sparse=None, recreate=True, **options) as coll:
        coll.upsert_texts(corpus.texts, ids=corpus.ids, vectors=list(vectors), vectors_from=encoder.identity)
        coll.optimize()
        result = scores(queries, qrels, lambda qs: coll.search_texts(qs, limit=100, with_payload=False, **search))
        coll.delete_collection()
    return result


def measure(
    args: argparse.Namespace,
    label: str,
    model: Path | None,
    vectors: np.ndarray,
    corpus: Corpus,
    queries: dict[str, str],
    qrels: dict[str, set[str]],
    root: Path,
) -> dict[str, Any]:
    """Every configuration of one model (``model``: its folder, None: the default): nDCG@10 and recall@100 x100,
    and bytes a point's dense vectors take, searched (what the first pass reads) and stored (all of them). Kept in
    ``root`` (a re-run reuses them)."""
    kept = root / f"figures-{label}.json"
    if kept.exists():
        print(f"\n== {label}: figures measured by an earlier run ({kept}) ==")
        return dict(json.loads(kept.read_text()))

    def load(truncate_dim: int | None = None) -> SentenceEncoder:
        options = {"device": "cpu", "precision": "fp32", "max_seq_length": args.tokens, "truncate_dim": truncate_dim}
        return SentenceEncoder.load(model, **options)  # type: ignore[arg-type]

    full, size, store = load(), vectors.shape[1], root / "edge"
    floats = searched_bytes(size, None)
    runs: list[tuple[str, SentenceEncoder, np.ndarray, dict[str, Any], dict[str, Any], float, float]] = [
        ("full", full, vectors, {}, {}, floats, floats)
    ]
    for d in args.dims:
        cut = searched_bytes(d, None)
        runs.append((f"dim{d}", load(d), _unit(vectors[:, :d]), {}, {}, cut, cut))
    for d in args.dims:
        cut = searched_bytes(d, None)
        first = {"candidates": args.candidates}
        runs.append((f"first{d}", full, vectors, {"first_stage_dim": d}, first, cut, cut + floats))
    raw = {"search_params": models.SearchParams(quantization=models.QuantizationSearchParams(rescore=False))}
    for preset in QUANTIZATIONS:
        codes = searched_bytes(size, preset)
        rescored = STORAGE_PRESETS[preset][1] is not None
        runs.append((preset, full, vectors, {"quantization": preset}, {}, codes, codes + (floats if rescored else 0)))
        if rescored:  # the codes' own ranking, for what re-scoring by the originals buys
            runs.append((f"{preset}_raw", full, vectors, {"quantization": preset}, raw, codes, codes + floats))
    figures: dict[str, Any] = {"candidates": args.candidates}
    print(f"\n== {label}: nDCG@10, recall@100 (x100), bytes a point searched / stored ==")
    for name, encoder, given, options, search, searched, stored in runs:
        ndcg, recall = _collection_scores(
            f"{label}-{name}", encoder, given, corpus, queries, qrels, store, search, **options
        )
        print(f"{name:16}{ndcg:7.2f}  {recall:7.2f}  {searched:7.0f} / {stored:5.0f}")
        figures |= {f"{name}_{label}_ndcg10": round(ndcg, 2), f"{name}_{label}_recall100": round(recall, 2)}
        figures |= {f"{name}_bytes_searched": searched, f"{name}_bytes_stored": stored}
    kept.write_text(json.dumps(figures))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--output", type=Path, required=True, help="keeps vectors, mined file, model (re-run reuses)")
    parser.add_argument("--dims", default="256,128,64", help="the cuts measured and trained, below the full size")
    parser.add_argument("--tokens", type=int, default=128, help="max_seq_length of encoding and training (cost)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--docs", type=int, default=None, help="first N abstracts only (quick run)")
    parser.add_argument(
        "--corpus", type=int, default=None, help="N abstracts: the relevant ones and others by hash (default: all)"
    )
    parser.add_argument("--train-queries", type=int, default=None, help="train on N train queries (default: all)")
    parser.add_argument(
        "--candidates", type=int, default=None, help="a first stage's candidates per search (default: the product's)"
    )
    parser.add_argument("--prepare-only", action="store_true", help="encode, mine and train; measure nothing")
    parser.add_argument(
        "--control", action="store_true", help="also fine-tune with MNRL alone (same rows, seed): the loss's own gain"
    )
    parser.add_argument("--base-only", action="store_true", help="measure the base model only (kept for a re-run)")
    args = parser.parse_args()
    args.dims = [int(d) for d in args.dims.split(",")]
    quiet_library_logs()
    began = time.perf_counter()
    print(f"{sys.platform}, torch CPU, {cpu_summary()}")
    folder = args.data / "scifact"
    corpus = read_corpus(folder / "corpus.jsonl.gz", args.docs)
    queries, qrels = read_split(folder / "queries_train.jsonl", folder / "qrels" / "train.tsv", set(corpus.ids))
    train, dev = train_dev(queries)
    if args.train_queries is not None:
        train = {q: train[q] for q in sorted(train, key=_rank)[: args.train_queries]}
    dev_qrels = {q: qrels[q] for q in dev}
    corpus = sampled(corpus, {d for q in [*train, *dev] for d in qrels[q]}, args.corpus)
    print(f"{len(corpus.ids)} abstracts; train {len(train)} queries, dev {len(dev)} (measured on dev)")
    root = args.output
    root.mkdir(parents=True, exist_ok=True)
    base = SentenceEncoder.load(device="cpu", precision="fp32", max_seq_length=args.tokens)
    base_vectors = corpus_vectors(base, corpus, root / "base.npy")
    if args.base_only:
        measure(args, "base", None, base_vectors, corpus, dev, dev_qrels, root)
        return
    mined = mined_file(base, corpus, base_vectors, train, qrels, root)
    training = fine_tune(args, mined, root / "model")
    trained = SentenceEncoder.load(root / "model", device="cpu", precision="fp32", max_seq_length=args.tokens)
    trained_vectors = corpus_vectors(trained, corpus, root / "trained.npy")
    models_measured = [("base", None, base_vectors), ("after", root / "model", trained_vectors)]
    figures: dict[str, Any] = {"train_steps": training["steps"], "train_seconds": training["train_seconds"]}
    if args.control:
        control = fine_tune(args, mined, root / "control", matryoshka=False)
        figures |= {"control_train_steps": control["steps"], "control_train_seconds": control["train_seconds"]}
        control_model = SentenceEncoder.load(
            root / "control", device="cpu", precision="fp32", max_seq_length=args.tokens
        )
        models_measured.append(
            ("control", root / "control", corpus_vectors(control_model, corpus, root / "control.npy"))
        )
    if args.prepare_only:
        print(f"prepared in {time.perf_counter() - began:.0f} s")
        return
    for label, model, vectors in models_measured:
        figures |= measure(args, label, model, vectors, corpus, dev, dev_qrels, root)
    print(f"(whole run {time.perf_counter() - began:.0f} s)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
