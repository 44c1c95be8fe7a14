"""Adapt the retriever to a corpus: BEIR SciFact before and after fine-tuning on hard negatives mined from the
collection, and documents with chunk context, in one run.

1. Index the corpus (5,183 abstracts, ``title + " " + text``, BEIR's input for dense models) with the base model
   (all-MiniLM-L6-v2) into a Qdrant Edge collection with BM25; measure nDCG@10 and recall@100, dense and hybrid
   (dbsf), on the evaluation queries (the anchor: "before").
2. The same abstracts as documents (``upsert_documents``: the abstract's text, its title as chunk context), base
   model: ``search_documents`` dense and hybrid (the second lever, apart from training).
3. Mine hard negatives for the training queries from the collection of step 1 (``mine_hard_negatives``, hybrid by
   default), fine-tune with MultipleNegativesRankingLoss on (query, positive, negatives) with batches free of
   duplicates, evaluating on the dev split through a real collection after every epoch and keeping the best model.
4. Re-embed the corpus with the trained model into a new collection and measure again ("after").
5. The stages past one vector (unless ``--no-stages``). Late interaction: a new token projection over the trained
   model's token vectors, trained by MaxSim on the same mined examples (``MaxSimRankingLoss``, the transformer
   frozen; step 3c), written by step 4's re-embedding into a multivector slot beside the dense and BM25 vectors,
   with the training-free variant (the trained model's own token vectors, ``--no-raw`` to skip) in another; each
   re-scores the hybrid candidates in the engine (``rescore=``). Re-rank: for each ``--rerankers`` recipe
   (init:loss:epochs:lr; by default a fresh head on the adapted model's transformer, listwise over each training
   query's positive and ``--rerank-negatives`` mined negatives, 3 epochs, lr 2e-5), a cross-encoder re-ranks the
   late-interaction hits (``rerank=``) at each of ``--rerank-depths`` and each ``--rerank-weights`` (1: its score
   alone; less: blended with the late-interaction score, ``rerank_weight=``); the JSON's ``rerank_after`` is the
   first recipe's best depth and weight, every recipe, depth and weight keyed beside it.
   With documents (unless ``--no-documents``), step 5e writes the abstracts as documents again (title as chunk
   context) with the adapted model and the trained token slot, and measures them through every stage the texts went
   through (dense, hybrid, + late interaction, + the first re-ranker at the guard's k and weight), each beside the
   texts' figure (JSON ``documents_after_<stage>``).
6. With ``--corpus-only``: adaptation with no labels (``adapt_to_corpus``): pseudo-queries from the corpus itself
   (titles and sentences, confirmed by BM25), negatives mined from the collection of step 1, MNRL, re-embedded into
   a new collection; measured on the evaluation queries and on all the train split's queries (809 claims), none of
   them seen by this step. ``--corpus-*`` flags choose the pseudo-queries (titles or not, sentences per text, random or
   last, word dropout, longest query, the BM25 rank a pair needs at least), ``--corpus-mine-range`` the mined
   negatives' ranks and ``--corpus-lr`` the learning rate (both ``adapt_to_corpus``'s defaults unless given).
7. With ``--corpus-stages``: the recipe's later stages from the corpus alone, over the base model (its dense vectors
   kept): a token projection (MaxSim) and a re-ranker (the first ``--rerankers`` recipe, from the default model)
   trained on the same kind of pseudo-queries, measured as hybrid + late interaction (+ re-rank) on each judged
   split; ``--corpus-no-late`` re-ranks the hybrid hits instead.

Splits: SciFact's train queries (809 claims) are split by a hash of their id into train (about 80 %) and dev
(about 20 %, never trained on). Training uses the train part; the best checkpoint is chosen on dev; the figures
are measured on dev, or on ``--eval-queries`` / ``--eval-qrels`` (BEIR format, e.g. SciFact's test split) when given.
The hash cuts five folds: ``--fold K`` makes fold K dev (0 by default); the five runs' figures, weighted by
``eval_queries``, measure the whole train split with every claim held out once (cross-validation). ``--guard F``
holds a fraction F of the train claims out of all training (``split_labelled``) and runs the library's stage guard
on them (``check_stage``): late interaction against hybrid after adaptation, the first re-ranker (k 20, weight
0.25 where measured) against the stage below it; the JSON adds ``guard_late_gain``, ``guard_late_kept``,
``guard_rerank_gain``, ``guard_rerank_kept`` and ``guarded_stack`` (the measured figure of the stages kept).

    python benchmarks/adapt.py --data ../shared/data [--eval-queries PATH --eval-qrels PATH] [--epochs 3]
        [--lr 5e-5] [--batch-size 16] [--negatives 1] [--chunk-tokens 128] [--no-context] [--no-stages]
        [--token-dim 128] [--late-epochs 3] [--rescore-candidates 50] [--rerank-depths 10,20,50] [--trained PATH]
        [--rerankers adapted:listwise:3:2e-5,...] [--rerank-negatives 7] [--rerank-weights 1,0.5,0.25,0.1]
        [--corpus-only [--corpus-pairs 2000] [--corpus-epochs 1] [--corpus-held-out 30]] [--corpus-stages
        [--corpus-no-late]] [--corpus-sentences 1] [--corpus-sentence-choice random|last] [--corpus-no-titles]
        [--corpus-word-dropout 0] [--corpus-max-words 48] [--corpus-min-rank 1] [--corpus-lr 2e-5]
        [--corpus-mine-range 10 50] [--device cuda] [--fold K]

The last line is JSON: nDCG@10 x100 of dense and hybrid before and after, of documents (base model, context), and
of each stage (hybrid + late interaction, raw and trained; + the re-ranker) with its gain, its cost per query (ms on
``--device``, batched) and per stored point (bytes); with ``--corpus-only`` also ``corpus_only_dense`` /
``corpus_only_hybrid`` (evaluation queries) and the same with ``_train_split`` (all train queries) beside
``dense_before_train_split`` / ``hybrid_before_train_split``; with ``--corpus-stages`` ``corpus_only_late_interaction``
and ``corpus_only_rerank_k<k>_w<weight>`` (``corpus_only_rerank_hybrid_...`` without late interaction), each also
with ``_train_split``; ``eval_queries`` counts the evaluation queries.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from _data import cpu_summary

from sbert_qdrant import CrossEncoder, MultiVectorEncoder, SentenceEncoder, TextCollection
from sbert_qdrant.adaptation import adapt_to_corpus, mine_against_context
from sbert_qdrant.training import (
    CrossEncoderBCELoss,
    CrossEncoderListwiseLoss,
    MaxSimRankingLoss,
    MinedNegatives,
    MiningGuards,
    MultipleNegativesRankingLoss,
    RetrievalEvaluator,
    Trainer,
    TrainingConfig,
    check_stage,
    mine_hard_negatives,
    split_labelled,
)
from sbert_qdrant.training.pseudo_queries import pseudo_queries

Mode = Literal["dense", "hybrid"]
MODES: tuple[Mode, ...] = ("dense", "hybrid")
#: mode -> (nDCG@10, recall@100), x100.
Scores = dict[str, tuple[float, float]]
#: One in this many train queries goes to the dev split (by a hash of its id).
DEV_ONE_IN = 5


@dataclass
class Corpus:
    ids: list[str]
    titles: list[str]
    bodies: list[str]

    @property
    def texts(self) -> list[str]:
        return [f"{t} {b}" for t, b in zip(self.titles, self.bodies, strict=True)]


def read_corpus(path: Path, limit: int | None) -> Corpus:
    corpus = Corpus([], [], [])
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(corpus.ids) >= limit:
                break
            doc = json.loads(line)
            corpus.ids.append(doc["_id"])
            corpus.titles.append(doc["title"])
            corpus.bodies.append(doc["text"])
    return corpus


def read_split(queries_path: Path, qrels_path: Path, known: set[str]) -> tuple[dict[str, str], dict[str, set[str]]]:
    """BEIR queries (JSONL) and qrels (TSV with a header): the queries with a positive judgement in the corpus."""
    qrels: dict[str, set[str]] = {}
    with qrels_path.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if int(row["score"]) > 0 and row["corpus-id"] in known:
                qrels.setdefault(row["query-id"], set()).add(row["corpus-id"])
    queries = {}
    with queries_path.open(encoding="utf-8") as f:
        for line in f:
            query = json.loads(line)
            if query["_id"] in qrels:
                queries[query["_id"]] = query["text"]
    return queries, {q: qrels[q] for q in queries}


def is_dev(query_id: str, fold: int = 0) -> bool:
    """Whether a train claim is in the dev fold: the train split is cut into DEV_ONE_IN folds by a hash of the
    id; fold 0 is the dev split every figure uses unless ``--fold`` names another (cross-validation)."""
    return int(hashlib.sha256(f"adapt-dev:{query_id}".encode()).hexdigest(), 16) % DEV_ONE_IN == fold


def train_dev(queries: dict[str, str], fold: int = 0) -> tuple[dict[str, str], dict[str, str]]:
    """The train claims cut into (train, dev) by ``is_dev``."""
    dev = {q: t for q, t in queries.items() if is_dev(q, fold)}
    return {q: t for q, t in queries.items() if q not in dev}, dev


def folds(queries: dict[str, str], qrels: dict[str, set[str]]) -> dict[str, tuple[dict[str, str], dict[str, set[str]]]]:
    """The train split's five folds (``--fold K``'s dev claims), keyed ``_fold<K>``: a step trained on no claim is
    judged on each in one run."""
    out = {}
    for fold in range(DEV_ONE_IN):
        dev = train_dev(queries, fold)[1]
        out[f"_fold{fold}"] = (dev, {q: qrels[q] for q in dev})
    return out


def quiet_library_logs() -> None:
    """Silence the per-batch truncation warnings and the training's INFO lines in a benchmark's output."""
    logging.getLogger("sbert_qdrant.encoder.encoder").setLevel(logging.ERROR)
    logging.getLogger("sbert_qdrant.training").setLevel(logging.ERROR)


class Rankings:
    """A searcher over rankings computed in one batch (so the package's RetrievalEvaluator scores them)."""

    def __init__(self, queries: Sequence[str], ranked: Sequence[Sequence[Any]]) -> None:
        self.by_query = dict(zip(queries, ranked, strict=True))

    def search_text(self, query: str, limit: int = 10) -> list[Any]:
        return list(self.by_query[query])[:limit]


def scores(
    queries: dict[str, str], qrels: dict[str, set[str]], search: Callable[[list[str]], list[list[Any]]]
) -> tuple[float, float]:
    """(nDCG@10, recall@100) x100 of a batch search over the queries."""
    texts = list(queries.values())
    metrics = RetrievalEvaluator(queries, {}, qrels, k_values=(100,), searcher=Rankings(texts, search(texts)))(None)  # type: ignore[arg-type]
    return metrics["ndcg@10"], metrics["recall@100"]


def text_scores(coll: TextCollection, queries: dict[str, str], qrels: dict[str, set[str]]) -> Scores:
    return {
        mode: scores(queries, qrels, lambda qs, m=mode: coll.search_texts(qs, limit=100, with_payload=False, mode=m))
        for mode in MODES
    }


def document_scores(coll: TextCollection, queries: dict[str, str], qrels: dict[str, set[str]]) -> Scores:
    def search(mode: Mode) -> Callable[[list[str]], list[list[Any]]]:
        return lambda qs: [coll.search_documents(q, limit=100, mode=mode, chunks=1) for q in qs]

    return {mode: scores(queries, qrels, search(mode)) for mode in MODES}


def index_texts(coll: TextCollection, corpus: Corpus) -> tuple[float, int]:
    """Seconds and texts encoded (a re-run with the same ``--store`` skips the stored ones)."""
    start = time.perf_counter()
    result = coll.upsert_texts(
        corpus.texts, ids=corpus.ids, payloads=[{"title": t} for t in corpus.titles], on_conflict="skip"
    )
    coll.optimize()
    return time.perf_counter() - start, result.written


def dev_searcher(corpus: Corpus, pool: list[str], folder: Path) -> Callable[[SentenceEncoder], TextCollection]:
    """Builds, for the encoder being trained, a fresh dense collection of the dev pool (a real collection)."""
    texts = dict(zip(corpus.ids, corpus.texts, strict=True))

    def build(encoder: SentenceEncoder) -> TextCollection:
        coll = TextCollection("dev", encoder, location=folder, sparse=None, recreate=True, show_progress_bar=False)
        coll.upsert_texts([texts[d] for d in pool], ids=pool)
        return coll

    return build


def write_documents(args: argparse.Namespace, coll: TextCollection, corpus: Corpus) -> float:
    """The abstracts written as documents (``--chunk-tokens`` chunks, the title as chunk context unless
    ``--no-context``; a re-run skips the stored ones), optimized; the seconds it took."""
    start = time.perf_counter()
    coll.upsert_documents(
        corpus.bodies,
        ids=corpus.ids,
        payloads=[{"title": t} for t in corpus.titles],
        chunk_tokens=args.chunk_tokens,
        on_conflict="skip",
        context_field="title" if args.context else None,
    )
    coll.optimize()
    return time.perf_counter() - start


def index_documents(
    args: argparse.Namespace,
    corpus: Corpus,
    base: SentenceEncoder,
    store: Path,
    queries: dict[str, str],
    qrels: dict[str, set[str]],
    timings: dict[str, float],
) -> Scores | None:
    """Step 2: the abstracts as documents, titles as chunk context (unless ``--no-context``), base model."""
    if not args.documents:
        return None
    context = "title as chunk context" if args.context else "no chunk context"
    print(f"\n== 2. documents, base model, {context}, {args.chunk_tokens}-token chunks ==")
    name = f"scifact-documents-{args.chunk_tokens}" + ("" if args.context else "-no-context")
    with TextCollection(name, base, location=store) as coll:
        timings["index documents"] = write_documents(args, coll, corpus)
        documents = document_scores(coll, queries, qrels)
    print(f"indexed in {timings['index documents']:.0f} s; documents: {documents}")
    return documents


def fine_tune(
    args: argparse.Namespace,
    examples: list[Any],
    evaluator: RetrievalEvaluator,
    output: Path,
    timings: dict[str, float],
) -> SentenceEncoder:
    """Step 3b: MNRL on the mined examples, the best model on the dev pool kept (resumes from ``output``)."""
    print(
        f"\n== 3b. train: MNRL, {args.negatives} hard negative(s), batches of {args.batch_size} without "
        f"duplicates, lr {args.lr}, {args.epochs} epoch(s), {args.train_tokens} tokens =="
    )
    encoder = SentenceEncoder.load(device=args.device, precision="fp32", max_seq_length=args.train_tokens)
    steps = args.epochs * -(-len(examples) // args.batch_size)
    config = TrainingConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        precision="fp32",
        eval_steps=max(1, steps // args.evals),
        checkpoint_steps=max(1, steps // args.evals),
        batch_sampler="no_duplicates",
        show_progress_bar=True,
    )
    print(f"step 0 on the dev pool: {evaluator(encoder)}")
    trainer = Trainer(encoder, [(MultipleNegativesRankingLoss(encoder), examples)], config, evaluator, output)
    result = trainer.fit(resume_from=output if (output / "checkpoints").is_dir() else None)
    timings["train"] = result.train_seconds
    for step, metrics in result.evaluations:
        print(f"step {step}: dev pool {metrics}")
    print(
        f"{result.steps} steps, {result.train_seconds:.0f} s in steps ({result.examples_per_second:.2f} "
        f"examples/s); best dev nDCG@10 {result.best_metric:.2f} at step {result.best_step}"
    )
    return encoder  # the best model: the trainer restored it


def reembed(
    base: SentenceEncoder,
    trained: SentenceEncoder,
    store: Path,
    queries: dict[str, str],
    qrels: dict[str, set[str]],
    timings: dict[str, float],
    slots: dict[str, MultiVectorEncoder] | None = None,
    name: str = "scifact-adapted",
) -> Scores:
    """Step 4: the collection re-embedded into ``name`` with the trained model (``reembed``), with the token
    ``slots`` of step 5 filled in the same pass, measured."""
    print(f"\n== re-embed the collection into {name} (reembed; token slots {sorted(slots or {})}) ==")
    with TextCollection(name, trained, location=store, named_vectors=slots) as stale:  # an earlier run's
        if stale.exists():
            stale.delete_collection()
    start = time.perf_counter()
    with TextCollection("scifact", base, location=store) as coll:
        coll.reembed(name, trained, named_vectors=slots)
    timings[f"re-embed {name}"] = time.perf_counter() - start
    with TextCollection(name, trained, location=store, named_vectors=slots) as coll:
        coll.optimize()
        return text_scores(coll, queries, qrels)


@dataclass
class Stage:
    """One stage's figures: (nDCG@10, recall@100) x100, ms per query (batched, CPU), bytes per stored point."""

    scores: tuple[float, float]
    ms_per_query: float
    bytes_per_point: float | None = None


def timed_scores(
    queries: dict[str, str], qrels: dict[str, set[str]], search: Callable[[list[str]], list[list[Any]]]
) -> tuple[tuple[float, float], float]:
    """``scores`` and the search's milliseconds per query (one batched call over every query, after one query to
    warm up: the first call of a model or a slot pays its loading)."""
    texts = list(queries.values())
    search(texts[:1])
    start = time.perf_counter()
    ranked = search(texts)
    ms = 1000 * (time.perf_counter() - start) / len(texts)
    return scores(queries, qrels, lambda qs: ranked), ms


def train_token_projection(
    args: argparse.Namespace, trained: SentenceEncoder, mined: MinedNegatives, output: Path, timings: dict[str, float]
) -> MultiVectorEncoder:
    """Step 3c: a new token projection over the trained model's (frozen, shared) token vectors, trained by MaxSim
    on the mined examples, saved in the sentence-transformers 6 multi-vector format."""
    print(
        f"\n== 3c. late interaction: a {args.token_dim}-dim token projection trained by MaxSim, {args.late_epochs} "
        f"epoch(s), lr {args.late_lr}, {args.train_tokens} tokens =="
    )
    late = MultiVectorEncoder.from_encoder(trained, dimension=args.token_dim)
    config = TrainingConfig(
        epochs=args.late_epochs,
        batch_size=args.batch_size,
        learning_rate=args.late_lr,
        precision="fp32",
        batch_sampler="no_duplicates",
        show_progress_bar=True,
    )
    served = trained.max_seq_length
    trained.max_seq_length = args.train_tokens  # the shared transformer: train as the dense model trained
    try:
        result = Trainer(late, [(MaxSimRankingLoss(late), mined.examples)], config, output_dir=output).fit()
    finally:
        trained.max_seq_length = served
    timings["train late interaction"] = result.train_seconds
    print(f"{result.steps} steps, {result.train_seconds:.0f} s; loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}")
    return MultiVectorEncoder.load(output, device=args.device, max_seq_length=served)  # as a user loads it back


def stored_bytes(encoder: MultiVectorEncoder, texts: list[str]) -> float:
    """Mean float32 bytes a text's token vectors take (every token but the skiplist's; no pooling)."""
    ids, _ = encoder.transformer.tokenize(texts)
    kept = [sum(token not in encoder.skiplist_ids for token in row) for row in ids]
    return 4 * encoder.dimension * sum(kept) / len(kept)


def late_interaction(
    args: argparse.Namespace,
    corpus: Corpus,
    trained: SentenceEncoder,
    slots: dict[str, MultiVectorEncoder],
    store: Path,
    queries: dict[str, str],
    qrels: dict[str, set[str]],
    name: str = "scifact-adapted",
) -> dict[str, Stage]:
    """Step 5a: the hybrid candidates of the re-embedded collection ``name`` re-scored by MaxSim over each token
    slot (``tokens``: the trained projection; ``raw``: the trained model's own token vectors)."""
    print(f"\n== 5a. re-score the hybrid top {args.rescore_candidates} by MaxSim in the engine, per token slot ==")
    with TextCollection(name, trained, location=store, named_vectors=slots) as coll:

        def search(rescore: str | None) -> Callable[[list[str]], list[list[Any]]]:
            depth = args.rescore_candidates  # every search returns that many (recall@100 reads recall@depth)
            return lambda qs: coll.search_texts(
                qs,
                limit=depth,
                with_payload=False,
                mode="hybrid",
                rescore=rescore,
                candidates=None if rescore is None else depth,
            )

        stages = {"hybrid": Stage(*timed_scores(queries, qrels, search(None)))}
        for name, encoder in slots.items():
            stages[name] = Stage(*timed_scores(queries, qrels, search(name)), stored_bytes(encoder, corpus.texts))
            print(f"hybrid + late interaction ({name}): {stages[name]}")
    return stages


@dataclass(frozen=True)
class RerankerSpec:
    """One re-ranker recipe: where its transformer starts (``default``: the default model; ``adapted``: the model
    step 3b trained), its loss (``bce`` on mined (query, text, 1 / 0) pairs; ``listwise``: softmax over a query's
    positive and ``--rerank-negatives`` mined negatives), epochs and learning rate."""

    init: Literal["default", "adapted"]
    loss: Literal["bce", "listwise"]
    epochs: int
    lr: float

    @classmethod
    def parse(cls, text: str) -> RerankerSpec:
        init, loss, epochs, lr = text.split(":")
        if init not in ("default", "adapted") or loss not in ("bce", "listwise"):
            raise ValueError(f"{text!r}: expected init:loss:epochs:lr, e.g. adapted:listwise:3:2e-5")
        return cls(init, loss, int(epochs), float(lr))  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        return f"{self.init}_{self.loss}_{self.epochs}ep_{self.lr:g}"


def train_reranker(
    args: argparse.Namespace,
    spec: RerankerSpec,
    mined: MinedNegatives,
    adapted: Path,
    output: Path,
    timings: dict[str, float],
) -> CrossEncoder:
    """Step 5b: a cross-encoder (a fresh one-score head on the default or the adapted model's transformer), trained
    on the mined negatives as ``spec`` says."""
    if spec.loss == "bce":
        objective_data: list[Any] = mined.labelled_pairs()
    else:
        size = args.rerank_negatives + 2
        objective_data = [e for e in mined.examples if len(e.texts) == size]
    print(
        f"\n== 5b. re-ranker {spec.label}: a cross-encoder from the {spec.init} model, {spec.loss} on "
        f"{len(objective_data)} mined {'pairs' if spec.loss == 'bce' else 'groups'}, {args.rerank_tokens} tokens =="
    )
    start = adapted if spec.init == "adapted" else None
    reranker = CrossEncoder.from_transformer(start, device=args.device, max_seq_length=args.rerank_tokens)
    loss = CrossEncoderBCELoss(reranker) if spec.loss == "bce" else CrossEncoderListwiseLoss(reranker)
    config = TrainingConfig(
        epochs=spec.epochs,
        batch_size=args.batch_size if spec.loss == "bce" else max(1, args.batch_size // 4),
        learning_rate=spec.lr,
        precision="fp32",
        show_progress_bar=True,
    )
    result = Trainer(reranker, [(loss, objective_data)], config, output_dir=output).fit()
    timings[f"train re-ranker {spec.label}"] = result.train_seconds
    print(f"{result.steps} steps, {result.train_seconds:.0f} s; loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}")
    return CrossEncoder.load(output, device=args.device, precision="fp32")


class Remembered:
    """A re-ranker (the ``Reranker`` protocol) that asks its cross-encoder once per (query, text) pair: the searches
    at each ``rerank_weight`` of one depth re-rank the same hits, so they pay one cross-encoder pass between them."""

    def __init__(self, cross: CrossEncoder) -> None:
        self.cross = cross
        self.scores: dict[tuple[str, str], float] = {}
        self.num_labels = cross.num_labels

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> list[float]:
        new = [pair for pair in dict.fromkeys(pairs) if pair not in self.scores]
        if new:
            scores = self.cross.predict(new, batch_size=batch_size)
            self.scores |= {pair: float(score) for pair, score in zip(new, scores, strict=True)}
        return [self.scores[pair] for pair in pairs]


#: (re-ranker label, depth k, rerank_weight) -> the stage's figures.
RerankFigures = dict[tuple[str, int, float], Stage]


def rerank_stage(
    args: argparse.Namespace,
    label: str,
    reranker: CrossEncoder,
    store: Path,
    trained: SentenceEncoder,
    slots: dict[str, MultiVectorEncoder] | None,
    queries: dict[str, str],
    qrels: dict[str, set[str]],
    name: str = "scifact-adapted",
) -> RerankFigures:
    """Step 5c: the late-interaction hits (the hybrid hits without ``slots``) of collection ``name`` re-ranked by the
    cross-encoder at each depth k, at each ``--rerank-weights`` (``rerank_weight=``: 1, its score alone; less,
    blended with the search's score). The time per query is the first weight's: the cross-encoder's pass (the
    others re-use its scores)."""
    print(f"\n== 5c. re-rank the hybrid{' + late interaction' if slots else ''} hits with {label} ==")
    figures: RerankFigures = {}
    with TextCollection(name, trained, location=store, named_vectors=slots) as coll:
        for k in args.rerank_depths:
            remembered = Remembered(reranker)
            for i, weight in enumerate(args.rerank_weights):

                def search(
                    qs: list[str], k: int = k, weight: float = weight, remembered: Remembered = remembered
                ) -> list[list[Any]]:
                    return coll.search_texts(
                        qs,
                        limit=k,
                        with_payload=False,
                        mode="hybrid",
                        rescore="tokens" if slots else None,
                        candidates=max(k, args.rescore_candidates) if slots else None,
                        rerank=remembered,
                        rerank_candidates=k,
                        rerank_weight=weight,
                    )

                measured, ms = timed_scores(queries, qrels, search)
                first = ms if i == 0 else figures[label, k, args.rerank_weights[0]].ms_per_query
                figures[label, k, weight] = Stage(measured, first)
                print(f"re-rank top {k}, weight {weight:g}: {figures[label, k, weight]}")
    return figures


def documents_stages(
    args: argparse.Namespace,
    corpus: Corpus,
    trained: SentenceEncoder,
    token_slot: MultiVectorEncoder,
    reranker: CrossEncoder,
    store: Path,
    queries: dict[str, str],
    qrels: dict[str, set[str]],
    timings: dict[str, float],
) -> dict[str, Stage]:
    """Step 5e: the abstracts as documents (title as chunk context unless ``--no-context``) with the adapted model and
    the trained token slot, through every stage the texts went through: dense, hybrid, hybrid + late interaction
    (``rescore="tokens"``), + the first re-ranker (k and weight as the guard reads them), one hit per document."""
    k, weight = guard_rerank_point(args)
    print(f"\n== 5e. documents, adapted model, every stage ({args.chunk_tokens}-token chunks, re-rank k {k}) ==")
    slots = {"tokens": token_slot}
    name = f"scifact-documents-adapted-{args.chunk_tokens}" + ("" if args.context else "-no-context")
    with TextCollection(name, trained, location=store, named_vectors=slots) as coll:
        timings["index documents adapted"] = write_documents(args, coll, corpus)
        depth = args.rescore_candidates
        remembered = Remembered(reranker)
        searches: dict[str, dict[str, Any]] = {
            "dense": {"mode": "dense", "limit": depth},
            "hybrid": {"mode": "hybrid", "limit": depth},
            "tokens": {"mode": "hybrid", "limit": depth, "rescore": "tokens", "candidates": depth},
            "rerank": {
                "mode": "hybrid",
                "limit": k,
                "rescore": "tokens",
                "candidates": max(k, depth),
                "rerank": remembered,
                "rerank_candidates": k,
                "rerank_weight": weight,
            },
        }
        stages = {}
        for stage, options in searches.items():

            def search(qs: list[str], options: dict[str, Any] = options) -> list[list[Any]]:
                return [coll.search_documents(q, chunks=1, **options) for q in qs]

            stages[stage] = Stage(*timed_scores(queries, qrels, search))
            print(f"documents {stage}: {stages[stage]}")
    return stages


def guard_stages(
    args: argparse.Namespace,
    reranker: CrossEncoder,
    store: Path,
    trained: SentenceEncoder,
    slots: dict[str, MultiVectorEncoder],
    guard: dict[str, str],
    qrels: dict[str, set[str]],
) -> dict[str, float]:
    """The library's stage guard on the ``--guard`` claims (never trained on): late interaction against hybrid after
    adaptation, then the re-ranker against the stage kept below it."""
    k, weight = guard_rerank_point(args)
    print(f"\n== 5d. the stage guard on {len(guard)} held-out train claims (margin +0.5 nDCG@10) ==")
    hybrid: dict[str, Any] = {"mode": "hybrid"}
    late = {"mode": "hybrid", "rescore": "tokens", "candidates": args.rescore_candidates}
    with TextCollection("scifact-adapted", trained, location=store, named_vectors=slots) as coll:
        first = check_stage(
            coll, guard, qrels, stage=late, below=hybrid, stage_name="late interaction", below_name="hybrid after"
        )
        print(first.report())
        below = first.search_options
        stage = below | {"rerank": reranker, "rerank_candidates": k, "rerank_weight": weight}
        if "rescore" in below:
            stage["candidates"] = max(k, args.rescore_candidates)
        name = "late interaction" if first.kept else "hybrid after"
        label = f"re-rank k {k}, weight {weight:g}"
        second = check_stage(coll, guard, qrels, stage=stage, below=below, stage_name=label, below_name=name)
        print(second.report())
    return {
        "guard_late_gain": first.gain,
        "guard_late_kept": float(first.kept),
        "guard_rerank_gain": second.gain,
        "guard_rerank_kept": float(second.kept),
    }


def guard_rerank_point(args: argparse.Namespace) -> tuple[int, float]:
    """The depth and weight the guard checks the re-ranker at: k 20 and 0.25 where measured, else the first."""
    k = 20 if 20 in args.rerank_depths else args.rerank_depths[0]
    weight = 0.25 if 0.25 in args.rerank_weights else args.rerank_weights[0]
    return k, weight


def guarded_stack(
    args: argparse.Namespace, guarded: dict[str, float], late: dict[str, Stage], rerank: RerankFigures, hybrid: float
) -> float | None:
    """The evaluation figure of the stages the guard kept (None where the kept stack was not measured: a re-ranker
    kept over hybrid without late interaction)."""
    k, weight = guard_rerank_point(args)
    label = args.rerankers[0].label
    if guarded["guard_late_kept"] and guarded["guard_rerank_kept"]:
        return rerank[label, k, weight].scores[0]
    if guarded["guard_late_kept"]:
        return late["tokens"].scores[0]
    return None if guarded["guard_rerank_kept"] else hybrid


def stages_figures(late: dict[str, Stage], rerank: RerankFigures, hybrid_after: float) -> dict[str, float | None]:
    """The stages' JSON keys: each stage's nDCG@10, gain over the stage before, ms per query and bytes per point;
    ``rerank_after`` is the first re-ranker at its best depth and weight, every other one keyed by its label."""
    headline = next(iter(rerank))[0]
    best = max((key for key in rerank if key[0] == headline), key=lambda key: rerank[key].scores[0])
    trained, raw, reranked = late["tokens"], late.get("raw"), rerank[best]
    return {
        "late_interaction_raw": raw.scores[0] if raw else None,
        "late_interaction_raw_gain": raw.scores[0] - hybrid_after if raw else None,
        "late_interaction_raw_ms": raw.ms_per_query - late["hybrid"].ms_per_query if raw else None,
        "late_interaction_raw_bytes": raw.bytes_per_point if raw else None,
        "late_interaction_after": trained.scores[0],
        "late_interaction_gain": trained.scores[0] - hybrid_after,
        "late_interaction_ms": trained.ms_per_query - late["hybrid"].ms_per_query,
        "late_interaction_bytes": trained.bytes_per_point,
        "rerank_after": reranked.scores[0],
        "rerank_gain": reranked.scores[0] - trained.scores[0],
        "rerank_ms": reranked.ms_per_query - trained.ms_per_query,
        "rerank_k": best[1],
        "rerank_weight": best[2],
        **{f"rerank_after_{lb}_k{k}_w{w:g}": stage.scores[0] for (lb, k, w), stage in rerank.items()},
        **{
            f"rerank_ms_k{k}": stage.ms_per_query - trained.ms_per_query
            for (lb, k, w), stage in rerank.items()
            if lb == headline
        },
    }


def corpus_only(
    args: argparse.Namespace,
    store: Path,
    root: Path,
    judged: dict[str, tuple[dict[str, str], dict[str, set[str]]]],
    timings: dict[str, float],
) -> dict[str, float]:
    """Step 6: adaptation from the corpus alone (no labelled query), re-embedded, measured on each judged split."""
    print(f"\n== 6. corpus only: pseudo-queries, mined negatives, MNRL ({args.corpus_epochs} epoch(s)), re-embed ==")
    name = "scifact-corpus-adapted"
    start = time.perf_counter()
    trainable = SentenceEncoder.load(device=args.device, precision="fp32")
    with TextCollection("scifact", trainable, location=store) as coll:
        with TextCollection(name, trainable, location=store) as stale:  # from an earlier run
            if stale.exists():
                stale.delete_collection()
        result = adapt_to_corpus(
            coll,
            trainable,
            root / "corpus-model",
            held_out=args.corpus_held_out,
            pool_depth=args.corpus_pool_depth,
            **pseudo_query_options(args),
            mine_range=tuple(args.corpus_mine_range),
            negatives=args.negatives,
            epochs=args.corpus_epochs,
            batch_size=args.batch_size,
            learning_rate=args.corpus_lr,
            train_tokens=args.train_tokens,
            precision="fp32",
            reembed_into=name,
            show_progress_bar=True,
        )
    timings["corpus only"] = time.perf_counter() - start
    print(result.report())
    figures = {"corpus_only_kept": float(result.kept)}
    trained = SentenceEncoder.load(result.model, device=args.device, precision="fp32")
    # the base model kept (no gain on the held-out check): the corpus-only figures are the base collection's
    with TextCollection(name if result.kept else "scifact", trained, location=store) as coll:
        coll.optimize()
        for split, (queries, qrels) in judged.items():
            measured = text_scores(coll, queries, qrels)
            print(f"corpus only on {split.strip('_') or 'the evaluation queries'}: {measured}")
            figures.update({f"corpus_only_{mode}{split}": measured[mode][0] for mode in MODES})
    return figures


def pseudo_query_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--corpus-*`` flags as ``pseudo_queries`` / ``adapt_to_corpus`` arguments."""
    return {
        "max_pairs": args.corpus_pairs,
        "title_field": None if args.corpus_no_titles else "title",
        "sentences_per_text": args.corpus_sentences,
        "sentence_choice": args.corpus_sentence_choice,
        "query_word_dropout": args.corpus_word_dropout,
        "max_query_words": args.corpus_max_words,
        "bm25_min_rank": args.corpus_min_rank,
    }


def corpus_stages(
    args: argparse.Namespace,
    corpus: Corpus,
    base: SentenceEncoder,
    store: Path,
    root: Path,
    judged: dict[str, tuple[dict[str, str], dict[str, set[str]]]],
    timings: dict[str, float],
) -> dict[str, float]:
    """Step 7: the recipe's later stages from the corpus alone, over the base model (its dense vectors kept): a
    token projection (unless ``--corpus-no-late``: the re-ranker then re-ranks the hybrid hits) and a re-ranker
    (``--rerankers``' first recipe, from the default model) trained on pseudo-queries against the rest of their
    text and negatives mined hybrid, measured on each judged split."""
    spec = replace(args.rerankers[0], init="default")
    late = "late interaction and " if args.corpus_late else ""
    print(f"\n== 7. corpus only, {late}re-ranker {spec.label} trained on pseudo-queries ==")
    name = "scifact-corpus-stages"
    start = time.perf_counter()
    with TextCollection("scifact", base, location=store) as coll:
        found = pseudo_queries(coll, **pseudo_query_options(args), show_progress_bar=True)
        guards = MiningGuards(*args.corpus_mine_range)
        pairs, groups = (
            mine_against_context(coll, found.pairs, negatives, guards, True)
            for negatives in (args.negatives, args.rerank_negatives)
        )
    timings["corpus stages: pseudo-queries, mining"] = time.perf_counter() - start
    print(f"{len(found.pairs)} pseudo-queries, {len(pairs.examples)} examples, {len(groups.examples)} groups")
    slots = None
    if args.corpus_late:
        slots = {"tokens": train_token_projection(args, base, pairs, root / "corpus-late-interaction", timings)}
        reembed(base, base, store, *judged[""], timings, slots, name=name)
    reranker = train_reranker(args, spec, groups, root, root / "corpus-reranker", timings)
    figures = {}
    for split, (queries, qrels) in judged.items():
        if slots:
            late = late_interaction(args, corpus, base, slots, store, queries, qrels, name=name)
            figures[f"corpus_only_late_interaction{split}"] = late["tokens"].scores[0]
        rerank = rerank_stage(
            args, spec.label, reranker, store, base, slots, queries, qrels, name=name if slots else "scifact"
        )
        over = "" if slots else "_hybrid"
        figures |= {
            f"corpus_only_rerank{over}{split}_k{k}_w{w:g}": stage.scores[0] for (_, k, w), stage in rerank.items()
        }
    return figures


def documents_beside_texts(
    args: argparse.Namespace, documents: dict[str, Stage], after: Scores, late: dict[str, Stage], rerank: RerankFigures
) -> dict[str, float | None]:
    """Step 5e's figures printed beside the texts' at each stage, and their JSON keys (``documents_after_<stage>``)."""
    k, weight = guard_rerank_point(args)
    texts = {
        "dense": after["dense"][0],
        "hybrid": after["hybrid"][0],
        "tokens": late["tokens"].scores[0],
        "rerank": rerank[args.rerankers[0].label, k, weight].scores[0],
    }
    names = {"tokens": "late_interaction", "rerank": f"rerank_k{k}_w{weight:g}"}
    print(f"\n{'adapted model, stage':40}{'texts':>7}  {'documents':>9}  (nDCG@10 x100; documents ms/query)")
    for stage, measured in documents.items():
        print(
            f"{names.get(stage, stage):40}{texts[stage]:7.2f}  {measured.scores[0]:9.2f}  "
            f"{measured.ms_per_query:7.1f} ms"
        )
    return {f"documents_after_{names.get(stage, stage)}": measured.scores[0] for stage, measured in documents.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--device", default="cpu", help="torch device for encoding and training (cpu, cuda)")
    parser.add_argument(
        "--fold", type=int, default=0, choices=range(DEV_ONE_IN), help="which fifth of the train claims is dev"
    )
    parser.add_argument("--eval-queries", type=Path, default=None, help="BEIR queries.jsonl to measure on")
    parser.add_argument("--eval-qrels", type=Path, default=None, help="BEIR qrels TSV of --eval-queries")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--train-tokens", type=int, default=128, help="max_seq_length while training (cost)")
    parser.add_argument("--evals", type=int, default=3, help="dev evaluations during training (best model kept)")
    parser.add_argument("--negatives", type=int, default=1, help="hard negatives per (query, positive)")
    parser.add_argument("--mine-mode", default="hybrid", choices=("dense", "sparse", "hybrid"))
    parser.add_argument("--range-min", type=int, default=2, help="skip the best N hits when mining")
    parser.add_argument("--range-max", type=int, default=30, help="mine among the best N hits")
    parser.add_argument("--relative-margin", type=float, default=None, help="mining guard (dense scores)")
    parser.add_argument("--chunk-tokens", type=int, default=128, help="documents' chunk size (step 2)")
    parser.add_argument("--dev-pool", type=int, default=10, help="dev corpus: relevant + best N hits per dev query")
    parser.add_argument("--docs", type=int, default=None, help="first N abstracts only (quick run)")
    parser.add_argument("--no-documents", dest="documents", action="store_false", help="skip step 2")
    parser.add_argument(
        "--no-context", dest="context", action="store_false", help="step 2 without the title as chunk context"
    )
    parser.add_argument("--no-adapt", dest="adapt", action="store_false", help="skip steps 3b and 4 (training)")
    parser.add_argument("--corpus-only", action="store_true", help="step 6: adapt with no labels (corpus only)")
    parser.add_argument("--corpus-pairs", type=int, default=2000, help="step 6: pseudo-queries (held-out included)")
    parser.add_argument("--corpus-epochs", type=int, default=1, help="step 6: epochs")
    parser.add_argument("--corpus-held-out", type=int, default=30, help="step 6: held-out texts (its own report)")
    parser.add_argument("--corpus-pool-depth", type=int, default=5, help="step 6: held-out pool, hits per query")
    parser.add_argument(
        "--corpus-stages", action="store_true", help="step 7: late interaction and re-ranker from pseudo-queries"
    )
    parser.add_argument(
        "--corpus-no-late", dest="corpus_late", action="store_false", help="step 7 without late interaction"
    )
    parser.add_argument("--corpus-no-titles", action="store_true", help="step 6: no title pseudo-queries")
    parser.add_argument("--corpus-sentences", type=int, default=1, help="step 6: sentences per text")
    parser.add_argument("--corpus-sentence-choice", choices=("random", "last"), default="random")
    parser.add_argument("--corpus-lr", type=float, default=2e-5, help="step 6: learning rate (adapt_to_corpus's)")
    parser.add_argument(
        "--corpus-mine-range",
        type=int,
        nargs=2,
        default=(10, 50),
        metavar=("MIN", "MAX"),
        help="steps 6-7: negatives among the hits ranked MIN..MAX-1 (adapt_to_corpus's 10 50)",
    )
    parser.add_argument("--corpus-word-dropout", type=float, default=0.0, help="step 6: query word dropout")
    parser.add_argument("--corpus-max-words", type=int, default=48, help="step 6: longest sentence query")
    parser.add_argument("--corpus-min-rank", type=int, default=1, help="step 6: BM25 rank a pair needs at least")
    parser.add_argument("--output", type=Path, default=None, help="keep the mined file and model here")
    parser.add_argument("--trained", type=Path, default=None, help="a model an earlier run trained (its OUTPUT/model)")
    parser.add_argument("--no-stages", dest="stages", action="store_false", help="skip step 5 (late int., re-rank)")
    parser.add_argument("--no-raw", dest="raw", action="store_false", help="step 5 without the raw token slot")
    parser.add_argument("--token-dim", type=int, default=128, help="late interaction: the token projection's size")
    parser.add_argument("--late-epochs", type=int, default=3)
    parser.add_argument("--late-lr", type=float, default=1e-3)
    parser.add_argument("--rescore-candidates", type=int, default=50, help="hybrid hits re-scored by MaxSim")
    parser.add_argument(
        "--rerankers",
        type=lambda v: [RerankerSpec.parse(x) for x in v.split(",")],
        default=[RerankerSpec("adapted", "listwise", 3, 2e-5)],
        help="re-ranker recipes init:loss:epochs:lr, comma-separated (the first is rerank_after)",
    )
    parser.add_argument("--rerank-negatives", type=int, default=7, help="listwise: mined negatives per query")
    parser.add_argument(
        "--guard", type=float, default=0.0, help="hold this fraction of train claims out for the stage guard (0: off)"
    )
    parser.add_argument(
        "--rerank-weights",
        type=lambda v: [float(w) for w in v.split(",")],
        default=[1.0, 0.5, 0.25, 0.1],
        help="rerank_weight values, w,w,... (1: the cross-encoder alone)",
    )
    parser.add_argument("--rerank-tokens", type=int, default=256, help="the cross-encoder's max_seq_length")
    parser.add_argument(
        "--rerank-depths", type=lambda v: [int(k) for k in v.split(",")], default=[10, 20, 50], help="k,k,..."
    )
    parser.add_argument(
        "--store", type=Path, default=None, help="Qdrant Edge folder to keep (a re-run resumes: stored texts skipped)"
    )
    args = parser.parse_args()
    if (args.eval_queries is None) != (args.eval_qrels is None):
        parser.error("give both --eval-queries and --eval-qrels, or neither")
    quiet_library_logs()
    began = time.perf_counter()
    print(f"{sys.platform}, torch on {args.device}, {cpu_summary()}")
    folder = args.data / "scifact"
    corpus = read_corpus(folder / "corpus.jsonl.gz", args.docs)
    known = set(corpus.ids)
    queries, qrels = read_split(folder / "queries_train.jsonl", folder / "qrels" / "train.tsv", known)
    train, dev = train_dev(queries, args.fold)
    guard: dict[str, str] = {}
    if args.guard:
        kept_ids, guard_ids = split_labelled(train, held_out=args.guard)
        guard = {str(q): train[str(q)] for q in guard_ids}
        train = {str(q): train[str(q)] for q in kept_ids}
    if args.eval_queries is not None:
        eval_queries, eval_qrels = read_split(args.eval_queries, args.eval_qrels, known)
        split = f"{args.eval_queries.name} ({len(eval_queries)} queries)"
        if set(eval_queries.values()) & set(train.values()):
            parser.error(f"{args.eval_queries} shares queries with the training split")
    else:
        eval_queries, eval_qrels, split = dev, {q: qrels[q] for q in dev}, f"dev split ({len(dev)} queries)"
    print(f"{len(corpus.ids)} abstracts; train {len(train)} queries, dev {len(dev)}; measured on {split}")
    base = SentenceEncoder.load(device=args.device, precision="fp32")
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.output or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        store = args.store or Path(tmp) / "edge"
        print("\n== 1. index with the base model, measure ==")
        with TextCollection("scifact", base, location=store) as coll:
            timings["index base"], written = index_texts(coll, corpus)
            before = text_scores(coll, eval_queries, eval_qrels)
            print(f"indexed {written} texts (others were stored) in {timings['index base']:.0f} s; before: {before}")
            unlabelled = args.corpus_only or args.corpus_stages  # trained on no claim: every fold judged in one run
            judged = {"": (eval_queries, eval_qrels), "_train_split": (queries, qrels)}
            judged |= folds(queries, qrels) if unlabelled else {}
            before_all = {split: text_scores(coll, *judged[split]) for split in judged if split} if unlabelled else None
            print("\n== 3a. mine hard negatives from it ==")
            start = time.perf_counter()
            pairs = [(train[q], d) for q in train for d in sorted(qrels[q])]
            guards = MiningGuards(args.range_min, args.range_max, relative_margin=args.relative_margin)

            def mine(negatives: int) -> MinedNegatives:
                claims, positives = [q for q, _ in pairs], [d for _, d in pairs]
                return mine_hard_negatives(
                    coll, claims, positives, mode=args.mine_mode, num_negatives=negatives, guards=guards
                )

            mined = mine(args.negatives)
            mined.write(root / "mined.jsonl")
            timings["mine"] = time.perf_counter() - start
            print(f"{len(mined.examples)} examples, {len(mined.skipped)} skipped, {timings['mine']:.1f} s")
            mined_groups = mined
            if any(spec.loss == "listwise" for spec in args.rerankers) and args.rerank_negatives != args.negatives:
                mined_groups = mine(args.rerank_negatives)
                print(f"re-ranker groups: {len(mined_groups.examples)} with {args.rerank_negatives} negatives each")
            dev_hits = coll.search_texts(list(dev.values()), limit=args.dev_pool, with_payload=False, mode="hybrid")
            pool = sorted({d for q in dev for d in qrels[q]} | {str(h.id) for hits in dev_hits for h in hits})
        documents = index_documents(args, corpus, base, store, eval_queries, eval_qrels, timings)
        after, late, rerank = None, None, None
        docs_after: dict[str, Stage] = {}
        guarded: dict[str, float] = {}
        if args.adapt:
            evaluator = RetrievalEvaluator(
                dev,
                {},
                {q: qrels[q] for q in dev},
                k_values=(100,),
                searcher=dev_searcher(corpus, pool, Path(tmp) / "dev"),
            )
            if args.trained is None:
                trained = fine_tune(args, mined.examples, evaluator, root / "model", timings)
            else:
                print(f"\n== 3b. the model trained by an earlier run: {args.trained} ==")
                trained = SentenceEncoder.load(args.trained, device=args.device, precision="fp32")
            trained.max_seq_length = base.max_seq_length
            slots = None
            if args.stages:
                slots = {"tokens": train_token_projection(args, trained, mined, root / "late-interaction", timings)}
                slots |= {"raw": MultiVectorEncoder.from_encoder(trained)} if args.raw else {}
            after = reembed(base, trained, store, eval_queries, eval_qrels, timings, slots)
            if slots:
                late = late_interaction(args, corpus, trained, slots, store, eval_queries, eval_qrels)
                adapted = args.trained or root / "model"
                rerank = {}
                for spec in args.rerankers:
                    group = mined_groups if spec.loss == "listwise" else mined
                    reranker = train_reranker(args, spec, group, adapted, root / f"reranker-{spec.label}", timings)
                    rerank |= rerank_stage(args, spec.label, reranker, store, trained, slots, eval_queries, eval_qrels)
                    if guard and spec == args.rerankers[0]:
                        guarded = guard_stages(args, reranker, store, trained, slots, guard, qrels)
                    if args.documents and spec == args.rerankers[0]:
                        docs_after = documents_stages(
                            args, corpus, trained, slots["tokens"], reranker, store, eval_queries, eval_qrels, timings
                        )
        corpus_figures = corpus_only(args, store, root, judged, timings) if args.corpus_only else {}
        if args.corpus_stages:
            corpus_figures |= corpus_stages(args, corpus, base, store, root, judged, timings)
    print(f"\n== results on {split} (nDCG@10, recall@100, x100) ==")
    rows = [(f"{mode} before (anchor)", before[mode]) for mode in MODES]
    rows += [(f"{mode} after", after[mode]) for mode in MODES] if after else []
    context = "context" if args.context else "no context"
    rows += [(f"documents {mode} (base model, {context})", documents[mode]) for mode in MODES] if documents else []
    for label, (ndcg, recall) in rows:
        print(f"{label:40}{ndcg:7.2f}  {recall:7.2f}")
    if after:
        print(f"dense: {after['dense'][0] - before['dense'][0]:+.2f} nDCG@10 (target >= +5 on test)")
        print(f"hybrid after: {after['hybrid'][0]:.2f} nDCG@10 (target >= 76 on test)")
    if documents:
        print(f"documents dense: {documents['dense'][0] - before['dense'][0]:+.2f} nDCG@10 over truncated texts")
    if before_all:
        corpus_figures |= {
            f"{mode}_before{split}": measured[mode][0] for split, measured in before_all.items() for mode in MODES
        }
        for split in (s for s in before_all if s.startswith("_fold")):
            if f"corpus_only_hybrid{split}" in corpus_figures:
                gain = corpus_figures[f"corpus_only_hybrid{split}"] - before_all[split]["hybrid"][0]
                print(f"corpus-only hybrid on {split[1:]}: {gain:+.2f} nDCG@10 over the base model")
        if args.corpus_only:
            print(f"corpus-only hybrid: {corpus_figures['corpus_only_hybrid']:.2f} nDCG@10 (target >= 75)")
    print("timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    print(f"(whole run {time.perf_counter() - began:.0f} s)")
    figures: dict[str, float | None] = {
        "eval_queries": len(eval_queries),
        "dense_before": before["dense"][0],
        "dense_after": after["dense"][0] if after else None,
        "hybrid_before": before["hybrid"][0],
        "hybrid_after": after["hybrid"][0] if after else None,
        "documents_dense": documents["dense"][0] if documents else None,
        "documents_hybrid": documents["hybrid"][0] if documents else None,
        **corpus_figures,
    }
    if late and rerank and after:
        for label, stage in [
            *((f"hybrid + late interaction ({n})", v) for n, v in late.items() if n != "hybrid"),
            *((f"  + {lb} top {k} weight {w:g}", v) for (lb, k, w), v in rerank.items()),
        ]:
            print(
                f"{label:40}{stage.scores[0]:7.2f}  {stage.ms_per_query:7.1f} ms/query  "
                f"{stage.bytes_per_point or 0:9.0f} B/point"
            )
        figures |= stages_figures(late, rerank, after["hybrid"][0])
        if guarded:
            figures |= guarded | {"guarded_stack": guarded_stack(args, guarded, late, rerank, after["hybrid"][0])}
        if docs_after:
            figures |= documents_beside_texts(args, docs_after, after, late, rerank)
        print(f"hybrid + late interaction + re-rank: {figures['rerank_after']:.2f} nDCG@10 (target >= 78)")
    print(json.dumps({k: v if v is None else round(v, 2) for k, v in figures.items()}))


if __name__ == "__main__":
    main()
