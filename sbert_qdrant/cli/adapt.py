"""``sbert-qdrant adapt-corpus``: adapt the collection's model to its own texts (or documents) with no labelled
questions (``sbert_qdrant.adaptation.adapt_to_corpus``), reporting before and after on a held-out sample; the base
model is kept, saying why, where the held-out sample shows no gain."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._engine import add_engine_options, open_collection


def _adapt(args: argparse.Namespace) -> int:
    import dataclasses

    from ..adaptation import adapt_to_corpus
    from ..settings import Settings
    from ._load import encoder_spec

    trainable = dataclasses.replace(encoder_spec(args, Settings()), precision="fp32").load()
    with open_collection(args) as coll:
        result = adapt_to_corpus(
            coll,
            trainable,
            args.output,
            held_out=args.held_out,
            max_pairs=args.max_pairs,
            title_field=args.title_field or None,
            sentences_per_text=args.sentences_per_text,
            bm25_top_k=args.bm25_top_k,
            bm25_min_rank=args.bm25_min_rank,
            sentence_choice=args.sentences,
            query_word_dropout=args.word_dropout,
            max_query_words=args.max_query_words,
            negatives=args.negatives,
            mine_range=tuple(args.mine_range),
            epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.lr,
            train_tokens=args.train_tokens,
            pool_depth=args.pool_depth,
            held_out_dropout=args.held_out_dropout,
            held_out_min_rank=args.held_out_min_rank,
            min_gain=args.min_gain,
            distill_top_k=args.distill_top_k,
            seed=args.seed,
            reembed_into=args.reembed_into,
            show_progress_bar=args.progress,
        )
    print(result.report())
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    adapt = commands.add_parser(
        "adapt-corpus",
        help="fine-tune the collection's model on pseudo-queries from its own texts (titles, headings, sentences; "
        "no labels), measured before and after on a held-out sample",
    )
    adapt.add_argument("--output", required=True, type=Path, help="folder for the adapted model")
    adapt.add_argument(
        "--reembed-into", default=None, metavar="NAME", help="re-embed the collection into NAME with the adapted model"
    )
    adapt.add_argument("--held-out", type=int, default=100, help="texts whose pseudo-queries are set aside (100)")
    adapt.add_argument("--max-pairs", type=int, default=2000, help="pseudo-queries to find, held-out ones included")
    adapt.add_argument("--title-field", default="title", help="payload field of a text's title ('' for none)")
    adapt.add_argument("--sentences-per-text", type=int, default=1, help="sentences drawn from each text (1)")
    adapt.add_argument(
        "--sentences", choices=("random", "last"), default="random", help="which sentences: drawn, or the last ones"
    )
    adapt.add_argument(
        "--word-dropout", type=float, default=0.0, help="drop each query word with this probability (0; harder queries)"
    )
    adapt.add_argument("--max-query-words", type=int, default=48, help="longest sentence taken as a query (48)")
    adapt.add_argument("--bm25-top-k", type=int, default=10, help="keep a pair when BM25 ranks its text this high")
    adapt.add_argument(
        "--bm25-min-rank",
        type=int,
        default=1,
        help="...and no higher than this (1; 2 drops the pairs BM25 ranks first: harder queries)",
    )
    adapt.add_argument("--negatives", type=int, default=1, help="hard negatives per pair, mined hybrid (1)")
    adapt.add_argument(
        "--mine-range",
        type=int,
        nargs=2,
        default=(10, 50),
        metavar=("MIN", "MAX"),
        help="negatives among the hits ranked MIN..MAX-1 (10 50)",
    )
    adapt.add_argument("--epochs", type=int, default=1)
    adapt.add_argument("--batch-size", type=int, default=16)
    adapt.add_argument("--lr", type=float, default=2e-5)
    adapt.add_argument("--train-tokens", type=int, default=128, help="token limit while training (cost; 128)")
    adapt.add_argument("--pool-depth", type=int, default=10, help="held-out pool: best N hits per query, each mode")
    adapt.add_argument(
        "--held-out-dropout", type=float, default=0.5, help="held-out queries: drop each word with this probability"
    )
    adapt.add_argument(
        "--held-out-min-rank",
        type=int,
        default=2,
        help="held-out queries: only those whose text BM25 ranks this low or misses (2; 1: every one)",
    )
    adapt.add_argument(
        "--min-gain",
        type=float,
        default=0.5,
        help="held-out nDCG@10 every mode must gain, else the base model is kept (0.5)",
    )
    adapt.add_argument(
        "--distill-top-k",
        type=int,
        default=0,
        help="also distil the hybrid ranking into the dense model: each pseudo-query's K best hybrid hits (0: off)",
    )
    adapt.add_argument("--seed", type=int, default=42)
    add_engine_options(adapt)
    adapt.set_defaults(run=_adapt)
