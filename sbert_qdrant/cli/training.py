"""``sbert-qdrant train`` and ``sbert-qdrant evaluate``: fine-tune an encoder or cross-encoder on files, score it on
files."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError
from ..files import read_columns, read_rows
from ..types import SEARCH_MODES, LabelKind
from ._engine import add_engine_options, open_collection

if TYPE_CHECKING:  # imported when a command runs: --help loads no torch or transformers
    from ..encoder import CrossEncoder, MultiVectorEncoder, SentenceEncoder
    from ..training import Evaluator, Example, Objective

#: objective -> (its loss class in sbert_qdrant.training, label kind, label column candidates, text column candidates).
_OBJECTIVES: dict[str, tuple[str, LabelKind | None, tuple[str, ...], tuple[tuple[str, ...], ...]]] = {
    "softmax-nli": (
        "SoftmaxLoss",
        "class",
        ("label", "gold_label"),
        (("premise", "hypothesis"), ("sentence1", "sentence2")),
    ),
    "cosine": ("CosineSimilarityLoss", "score", ("score", "label"), (("sentence1", "sentence2"),)),
    "triplet": ("TripletLoss", None, (), (("anchor", "positive", "negative"),)),
    "mnrl": (
        "MultipleNegativesRankingLoss",
        None,
        (),
        (("anchor", "positive", "negative"), ("anchor", "positive"), ("sentence1", "sentence2")),
    ),
    "contrastive": (
        "OnlineContrastiveLoss",
        "binary",
        ("is_duplicate", "label"),
        (("question1", "question2"), ("sentence1", "sentence2")),
    ),
    "cross-encoder-binary": (
        "CrossEncoderBCELoss",
        "binary",
        ("is_duplicate", "label"),
        (("question1", "question2"), ("sentence1", "sentence2"), ("query", "text")),
    ),
    "cross-encoder-regression": ("CrossEncoderMSELoss", "score", ("score", "label"), (("sentence1", "sentence2"),)),
    "cross-encoder-listwise": (
        "CrossEncoderListwiseLoss",
        None,
        (),
        (("query", "positive", "negative"), ("anchor", "positive", "negative")),
    ),
    "late-interaction": (
        "MaxSimRankingLoss",
        None,
        (),
        (("query", "positive", "negative"), ("anchor", "positive", "negative"), ("anchor", "positive")),
    ),
}
#: Objectives that read a mined file's columns (query, positive, negative_1..k) when it has them;
#: cross-encoder-binary reads each (query, positive) as 1 and each (query, negative) as 0.
_MINED_OBJECTIVES = {"mnrl", "cross-encoder-listwise", "cross-encoder-binary", "late-interaction"}
#: Objectives that train a CrossEncoder, and the one that trains a MultiVectorEncoder (the others: SentenceEncoder).
_CROSS_ENCODER_OBJECTIVES = {"cross-encoder-binary", "cross-encoder-regression", "cross-encoder-listwise"}
_LATE_INTERACTION_OBJECTIVES = {"late-interaction"}
_PAIR_COLUMNS = (("sentence1", "sentence2"), ("question1", "question2"), ("anchor", "positive"), ("query", "positive"))


def _columns(
    path: str, given: str | None, candidates: Sequence[Sequence[str]], what: str, flag: str = "--columns"
) -> list[str]:
    """The text columns: as given (comma-separated), else the first candidate set the file's first row has."""
    if given:
        return [c.strip() for c in given.split(",")]
    found = read_columns(path)
    for names in candidates:
        if all(n in found for n in names):
            return list(names)
    options = " or ".join(",".join(c) for c in candidates)
    raise InvalidArgumentError(
        f"{path} has columns {found}, none of the {what} defaults ({options}); name them with {flag}."
    )


def _label_column(path: str, given: str | None, candidates: Sequence[str]) -> str:
    if given:
        return given
    columns = read_columns(path)
    found = next((c for c in candidates if c in columns), None)
    if found is None:
        raise InvalidArgumentError(f"{path} has no label column {list(candidates)}; name it with --label-column.")
    return found


def _task(
    args: argparse.Namespace, objective: str, path: str, encoder: SentenceEncoder | CrossEncoder | MultiVectorEncoder
) -> tuple[Objective, list[Example]]:
    from .. import training
    from ..training.hard_negatives import MinedNegatives, mined_columns

    loss_name, kind, label_candidates, text_candidates = _OBJECTIVES[objective]
    loss_class: type[Objective] = getattr(training, loss_name)
    mined = mined_columns(read_columns(path)) if objective in _MINED_OBJECTIVES and not args.columns else None
    options: dict[str, Any] = {"errors": "warn" if args.skip_bad_rows else "raise", "limit": args.limit}
    if mined and objective == "cross-encoder-binary":
        triplets = training.read_examples(path, mined, **options)
        return loss_class(encoder), MinedNegatives(triplets).labelled_pairs()
    if mined:
        text_candidates = (tuple(mined), *text_candidates)
    texts = _columns(path, args.columns, text_candidates, objective)
    label = _label_column(path, args.label_column, label_candidates) if kind else None
    if kind == "class":
        options["label_map"] = {name: i for i, name in enumerate(training.NLI_LABELS)}
    examples = training.read_examples(path, texts, label, kind or "class", max_score=args.max_score, **options)
    return loss_class(encoder), examples


def _pairs(args: argparse.Namespace, path: str, label_candidates: Sequence[str], kind: LabelKind) -> list[Example]:
    from ..training import read_examples

    texts = _columns(path, args.eval_columns, _PAIR_COLUMNS, "pair", "--eval-columns")
    label = _label_column(path, None, label_candidates)
    return read_examples(path, texts, label, kind, max_score=args.max_score)


def _evaluators(args: argparse.Namespace) -> list[tuple[str, str, Evaluator]]:
    from ..training import PairClassificationEvaluator, RetrievalEvaluator, STSEvaluator, read_examples

    found: list[tuple[str, str, Evaluator]] = []
    for path in args.eval_sts or []:
        rows = _pairs(args, path, ("score", "label"), "score")
        found.append(("sts", path, STSEvaluator(*_split(rows), [float(r.label or 0) for r in rows])))
    for path in args.eval_pairs or []:
        rows = _pairs(args, path, ("is_duplicate", "label"), "binary")
        found.append(("pairs", path, PairClassificationEvaluator(*_split(rows), [int(r.label or 0) for r in rows])))
    for path in args.eval_retrieval or []:
        rows = read_examples(path, _columns(path, args.eval_columns, _PAIR_COLUMNS, "retrieval", "--eval-columns"))
        queries = {i: r.texts[0] for i, r in enumerate(rows)}
        corpus = {text: text for r in rows for text in r.texts[1:2]}
        relevant = {i: {r.texts[1]} for i, r in enumerate(rows)}
        found.append(("retrieval", path, RetrievalEvaluator(queries, corpus, relevant)))
    return found


def _split(rows: list[Example]) -> tuple[list[str], list[str]]:
    return [r.texts[0] for r in rows], [r.texts[1] for r in rows]


def _load_model(args: argparse.Namespace, kind: str = "encoder") -> SentenceEncoder | CrossEncoder | MultiVectorEncoder:
    """The model in ``--model``: a cross-encoder or multi-vector folder loads as one; training a cross-encoder
    (``kind`` "cross-encoder") starts one from any other model's transformer, and training late interaction
    (``kind`` "late-interaction") a new token projection of ``--token-dim`` over a sentence encoder's tokens."""
    from ..encoder import CrossEncoder, MultiVectorEncoder, SentenceEncoder, resolve_model_folder
    from ..encoder.cross_loading import is_cross_encoder
    from ..encoder.multivector import is_multivector_model

    folder = resolve_model_folder(args.model)
    device, max_seq_length = args.device, args.max_seq_length
    if is_cross_encoder(folder):
        return CrossEncoder.load(folder, device=device, max_seq_length=max_seq_length, precision="fp32")
    if is_multivector_model(folder):
        return MultiVectorEncoder.load(folder, device=device, max_seq_length=max_seq_length)
    if kind == "cross-encoder":
        return CrossEncoder.from_transformer(folder, device=device, max_seq_length=max_seq_length, seed=args.seed)
    encoder = SentenceEncoder.load(folder, device=device, max_seq_length=max_seq_length, precision="fp32")
    if kind == "late-interaction":
        return MultiVectorEncoder.from_encoder(encoder, dimension=args.token_dim, seed=args.seed)
    return encoder


def _train(args: argparse.Namespace) -> int:
    import torch

    from ..training import Trainer, TrainingConfig

    objectives = args.objective or ["softmax-nli"]
    if args.certify_groups < 1:
        raise InvalidArgumentError(f"--certify-groups {args.certify_groups} must be 1 or more.")
    if len(objectives) == 1:
        objectives = objectives * len(args.train)
    if len(objectives) != len(args.train):
        raise InvalidArgumentError(
            f"got {len(args.objective)} --objective and {len(args.train)} --train; give one objective, or one per file."
        )
    kinds = {_model_kind(objective) for objective in objectives}
    if len(kinds) > 1:
        raise InvalidArgumentError(
            f"--objective {' '.join(objectives)} mixes objectives of {' and '.join(sorted(kinds))} models; they "
            "train different models, so train them in separate runs."
        )
    evaluators = _evaluators(args)
    if len(evaluators) > 1:
        raise InvalidArgumentError(
            "give one --eval-sts, --eval-pairs or --eval-retrieval file; the best model is kept by its metric."
        )
    (kind,) = kinds
    encoder = _load_model(args, kind)
    if _kind_of(encoder) != kind:
        fitting = sorted(o for o in _OBJECTIVES if _model_kind(o) == _kind_of(encoder))
        raise InvalidArgumentError(
            f"--model {args.model} is a {_kind_of(encoder)} model; train it with --objective {', '.join(fitting)}."
        )
    torch.manual_seed(args.seed)  # the objectives' heads (SoftmaxLoss) start from the same weights every run
    tasks = [_task(args, objective, path, encoder) for objective, path in zip(objectives, args.train, strict=True)]
    if args.matryoshka_dims:
        tasks = [(_matryoshka(args, objective), examples) for objective, examples in tasks]
    config = TrainingConfig(
        batch_sampler=args.batch_sampler,
        epochs=args.epochs,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        warmup_ratio=args.warmup_ratio,
        precision=args.precision,
        seed=args.seed,
        eval_steps=args.eval_steps,
        checkpoint_steps=args.checkpoint_steps,
        show_progress_bar=args.progress,
    )
    evaluator = evaluators[0][2] if evaluators else None
    trainer = Trainer(encoder, tasks, config, evaluator=evaluator, output_dir=args.output)
    if evaluator is not None:
        print(json.dumps({"step": 0, **evaluator(_evaluable(encoder))}))
    result = trainer.fit(resume_from=args.output if args.resume else None)
    for step, metrics in result.evaluations:
        print(json.dumps({"step": step, **metrics}))
    best = f", best {evaluator.primary_metric} {result.best_metric:.2f} at step {result.best_step}" if evaluator else ""
    print(
        f"trained {result.steps} steps ({result.examples_per_second:.1f} examples/s){best} -> {args.output}",
        file=sys.stderr,
    )
    if kind == "cross-encoder" and args.certify_int8:
        _certify_int8(args, [example for _, examples in tasks for example in examples])
    return 0


def _certify_int8(args: argparse.Namespace, examples: Sequence[Example]) -> None:
    """Certify the saved cross-encoder's static int8 for this CPU (``certify_int8``) on held-apart training groups,
    calibrated on other training pairs, and write the ranges into its folder; print the loss and the verdict. Never
    fails the training: where int8 cannot run or cannot be certified, it says so."""
    from ..encoder import CrossEncoder
    from ..encoder.cross_int8 import certification_split, certify_int8
    from ..encoder.cross_loading import ranges_file
    from ..encoder.identity import weights_digest
    from ..errors import SbertQdrantError

    pairs, groups = certification_split([e.texts for e in examples], args.certify_groups, args.seed)
    if not groups:
        print(
            "int8: not certified (too few training queries to hold some apart); 'auto' keeps fp32/bf16", file=sys.stderr
        )
        return
    try:
        cross = CrossEncoder.load(args.output, device="cpu", precision="fp32")  # int8 is a CPU precision
        check = certify_int8(cross, pairs, groups)
    except SbertQdrantError as exc:
        print(f"int8: not certified ({exc}); 'auto' keeps fp32/bf16", file=sys.stderr)
        return
    check.ranges.save(ranges_file(args.output, weights_digest(cross.transformer)))
    print(f"int8: {check.report()}", file=sys.stderr)


def _evaluable(model: SentenceEncoder | CrossEncoder | MultiVectorEncoder) -> SentenceEncoder | CrossEncoder:
    """The model, when the evaluators can read it (a multi-vector model is measured through a collection)."""
    from ..encoder import MultiVectorEncoder

    if isinstance(model, MultiVectorEncoder):
        raise InvalidArgumentError(
            f"--model {model.name} is a multi-vector model; the evaluators read a sentence encoder or a "
            "cross-encoder: measure it through a collection with its multivector slot (search_text(rescore=...))."
        )
    return model


def _model_kind(objective: str) -> str:
    if objective in _CROSS_ENCODER_OBJECTIVES:
        return "cross-encoder"
    return "late-interaction" if objective in _LATE_INTERACTION_OBJECTIVES else "encoder"


def _kind_of(model: object) -> str:
    from ..encoder import CrossEncoder, MultiVectorEncoder

    if isinstance(model, CrossEncoder):
        return "cross-encoder"
    return "late-interaction" if isinstance(model, MultiVectorEncoder) else "encoder"


def _matryoshka(args: argparse.Namespace, objective: Objective) -> Objective:
    """``objective`` summed over the ``--matryoshka-dims`` cuts of the embeddings (a bi-encoder's only)."""
    from ..training import MatryoshkaLoss, SentenceObjective

    if not isinstance(objective, SentenceObjective):
        raise InvalidArgumentError(
            "--matryoshka-dims trains a bi-encoder's embeddings; drop it for the cross-encoder and "
            "late-interaction objectives."
        )
    dims, weights = _numbers(args.matryoshka_dims, "--matryoshka-dims", int), None
    if args.matryoshka_weights:
        weights = _numbers(args.matryoshka_weights, "--matryoshka-weights", float)
    return MatryoshkaLoss(objective, dims, weights)


def _numbers(given: str, flag: str, kind: type[int] | type[float]) -> list[Any]:
    try:
        return [kind(part) for part in given.split(",")]
    except ValueError:
        raise InvalidArgumentError(f"{flag} {given!r} must be comma-separated numbers, e.g. 384,256,128,64.") from None


def _mine(args: argparse.Namespace) -> int:
    from ..training.hard_negatives import MiningGuards, mine_hard_negatives

    guards = MiningGuards(
        args.range_min, args.range_max, args.max_score, args.min_score, args.absolute_margin, args.relative_margin
    )
    fields = [args.query_field, args.positive_field]
    rows = [row for _, row in read_rows(args.pairs, columns=fields, fix="pass --query-field and --positive-field")]
    with open_collection(args) as coll:
        mined = mine_hard_negatives(
            coll,
            [row[args.query_field] for row in rows],
            [row[args.positive_field] for row in rows],
            documents=args.documents,
            mode=args.mode,
            num_negatives=args.negatives,
            guards=guards,
            show_progress_bar=args.progress,
        )
    mined.write(args.output)
    print(
        f"{args.pairs}: {len(mined.examples)} examples with {args.negatives} negatives -> {args.output}; "
        f"{len(mined.skipped)} (query, positive) rows skipped (too few negatives passed the guards).",
        file=sys.stderr,
    )
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    evaluators = _evaluators(args)
    if not evaluators:
        raise InvalidArgumentError("nothing to evaluate; give --sts, --pairs or --retrieval FILE.")
    encoder = _evaluable(_load_model(args))
    for name, path, evaluator in evaluators:
        print(json.dumps({"evaluator": name, "file": path, **evaluator(encoder)}))
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        help="folder or hub id (default: all-MiniLM-L6-v2); a cross-encoder folder loads as a cross-encoder and a "
        "multi-vector folder as a late-interaction model; the cross-encoder objectives start a new cross-encoder from "
        "any other model's transformer, late-interaction a new token projection over a sentence encoder's tokens",
    )
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps (default: best available)")
    parser.add_argument("--max-seq-length", type=int, default=None, help="token limit (default: the model's)")
    parser.add_argument("--eval-columns", default=None, help="text columns of the evaluation files, comma-separated")
    parser.add_argument("--max-score", type=float, default=5.0, help="top of the score scale (STS-B: 5)")


def add_commands(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser(
        "train",
        help="fine-tune an encoder (or a cross-encoder) on pairs or triplets from JSONL/CSV/TSV files (optionally .gz)",
    )
    train.add_argument("--objective", action="append", choices=sorted(_OBJECTIVES), help="one, or one per --train")
    train.add_argument("--train", action="append", required=True, metavar="FILE", help="training file (repeatable)")
    train.add_argument("--output", required=True, type=Path, help="folder for the trained model and checkpoints")
    train.add_argument("--eval-sts", action="append", metavar="FILE", help="STS pairs with a score column")
    train.add_argument("--eval-pairs", action="append", metavar="FILE", help="pairs with a 0/1 duplicate column")
    train.add_argument(
        "--eval-retrieval", action="append", metavar="FILE", help="held-out (query, relevant text) pairs: nDCG@10"
    )
    train.add_argument("--columns", default=None, help="text columns of the training files, comma-separated")
    train.add_argument("--label-column", default=None, help="label column (default: by objective)")
    train.add_argument("--limit", type=int, default=None, help="read at most this many rows per training file")
    train.add_argument("--skip-bad-rows", action="store_true", help="warn about malformed rows and skip them")
    train.add_argument("--epochs", type=int, default=1)
    train.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (overrides --epochs)")
    train.add_argument("--batch-size", type=int, default=16)
    train.add_argument("--lr", type=float, default=2e-5)
    train.add_argument("--warmup-ratio", type=float, default=0.1)
    train.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16", "fp16"))
    train.add_argument("--seed", type=int, default=42)
    train.add_argument("--eval-steps", type=int, default=None, help="evaluate every N steps (and at the end)")
    train.add_argument("--checkpoint-steps", type=int, default=None, help="write a resumable checkpoint every N steps")
    train.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --output")
    train.add_argument(
        "--batch-sampler",
        default="random",
        choices=("random", "no_duplicates"),
        help="no_duplicates: no text twice in a batch (no in-batch false negatives for mnrl)",
    )
    train.add_argument(
        "--matryoshka-dims",
        default=None,
        metavar="DIMS",
        help="also train the embeddings cut to these sizes, e.g. 384,256,128,64 (MatryoshkaLoss around each "
        "bi-encoder objective), so that truncate_dim keeps their quality",
    )
    train.add_argument(
        "--matryoshka-weights",
        default=None,
        metavar="W",
        help="one weight per --matryoshka-dims size (default: 1 each)",
    )
    train.add_argument("--no-progress", dest="progress", action="store_false", help="hide the progress bar")
    train.add_argument(
        "--no-certify-int8",
        dest="certify_int8",
        action="store_false",
        help="cross-encoders: skip certifying static int8 after training (by default it is measured against fp32 "
        "on held-apart training groups and, where exact-grade, run by load(precision='auto') on this CPU)",
    )
    train.add_argument(
        "--certify-groups",
        type=int,
        default=50,
        help="cross-encoders: training queries held apart to certify int8 on (default 50, at most half of them)",
    )
    train.add_argument(
        "--token-dim",
        type=int,
        default=128,
        help="late-interaction: the new token projection's size over a sentence encoder's tokens",
    )
    _common(train)
    train.set_defaults(run=_train)

    mine = commands.add_parser(
        "mine-negatives",
        help="hard negatives for (query, positive id) pairs from a collection, as a training file for mnrl",
    )
    mine.add_argument("pairs", type=Path, help="JSONL/CSV/TSV of (query, positive id) rows; repeat a query per id")
    mine.add_argument("--output", required=True, type=Path, help="JSONL to write: query, positive, negative_1..k")
    mine.add_argument("--query-field", default="query", help="field holding the query (default: query)")
    mine.add_argument("--positive-field", default="positive_id", help="field holding the positive's id")
    mine.add_argument("--documents", action="store_true", help="positives are documents (all their chunks count)")
    mine.add_argument("--mode", default="hybrid", choices=SEARCH_MODES, help="search mode")
    mine.add_argument("--negatives", type=int, default=3, help="negatives per (query, positive) (default 3)")
    mine.add_argument("--range-min", type=int, default=0, help="skip the best N hits (default 0)")
    mine.add_argument("--range-max", type=int, default=50, help="candidates: hits ranked below N (default 50)")
    mine.add_argument("--max-score", type=float, default=None, help="drop candidates scoring above this")
    mine.add_argument("--min-score", type=float, default=None, help="drop candidates scoring below this")
    mine.add_argument("--absolute-margin", type=float, default=None, help="keep candidates <= positive - margin")
    mine.add_argument("--relative-margin", type=float, default=None, help="keep candidates <= positive * (1 - m)")
    add_engine_options(mine)
    mine.set_defaults(run=_mine)

    evaluate = commands.add_parser("evaluate", help="score an encoder on STS, duplicate-pair or retrieval files")
    evaluate.add_argument("--sts", dest="eval_sts", action="append", metavar="FILE", help="pairs with a score")
    evaluate.add_argument("--pairs", dest="eval_pairs", action="append", metavar="FILE", help="0/1 labelled pairs")
    evaluate.add_argument(
        "--retrieval", dest="eval_retrieval", action="append", metavar="FILE", help="(query, relevant text) pairs"
    )
    _common(evaluate)
    evaluate.set_defaults(run=_evaluate)
