"""Readers for the shared benchmark data (``--data``: stsb/, quora/, scifact/) and metrics shared by benchmarks."""

from __future__ import annotations

import csv
import gzip
import json
import os
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from sbert_qdrant.encoder import cpu


def read_stsb(path: Path) -> tuple[list[str], list[str], list[float]]:
    """sentence1, sentence2 and gold score columns of an STS-B TSV (gzip or plain)."""
    return _read_scored_tsv(path, "sentence1", "sentence2", "score")


def read_sick(path: Path) -> tuple[list[str], list[str], list[float]]:
    """sentence_A, sentence_B and relatedness columns of a SICK TSV (gzip or plain)."""
    return _read_scored_tsv(path, "sentence_A", "sentence_B", "relatedness_score")


def _read_scored_tsv(path: Path, first: str, second: str, score: str) -> tuple[list[str], list[str], list[float]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r[first] for r in rows], [r[second] for r in rows], [float(r[score]) for r in rows]


def read_quora_questions(path: Path, limit: int) -> list[str]:
    """Distinct questions of the Quora pairs file, in file order, at most ``limit``."""
    seen: dict[str, None] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            pair = json.loads(line)
            for key in ("question1", "question2"):
                seen.setdefault(pair[key], None)
            if len(seen) >= limit:
                break
    return list(seen)[:limit]


def sts_spearman(left: np.ndarray, right: np.ndarray, gold: list[float]) -> float:
    """Spearman x100 of the cosine of row pairs against gold scores."""
    left = left / np.linalg.norm(left, axis=1, keepdims=True)
    right = right / np.linalg.norm(right, axis=1, keepdims=True)
    return float(100 * spearmanr((left * right).sum(axis=1), gold).statistic)


def read_corpus(data: Path, limit: int) -> list[str]:
    """Up to ``limit`` distinct real sentences: Quora questions, then NLI and STS-B sentences."""
    seen = dict.fromkeys(read_quora_questions(data / "quora" / "quora_pairs_train.jsonl.gz", limit))
    sources = [(data / "nli" / f, ("premise", "hypothesis")) for f in sorted(os.listdir(data / "nli"))]
    sources.append((data / "stsb" / "stsb_train.tsv.gz", ("sentence1", "sentence2")))
    for path, columns in sources:
        if len(seen) >= limit or not path.name.endswith(".tsv.gz") or "test" in path.name:
            continue
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                for column in columns:
                    text = (row.get(column) or "").strip()
                    if text:
                        seen.setdefault(text, None)
    return list(seen)[:limit]


def read_quora_pairs(path: Path) -> list[dict[str, object]]:
    """Every labelled pair of the Quora pairs file."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def read_quora_duplicate_probes(data: Path, limit: int | None = None) -> tuple[list[tuple[str, str]], list[str]]:
    """Held-out duplicate pairs (pair id divisible by 5) as (query, partner) probes, and every question in them.

    limit: at most this many probes (None: all), for quick runs.
    """
    pairs = read_quora_pairs(data / "quora" / "quora_pairs_train.jsonl.gz")
    held_out = [p for p in pairs if int(p["id"]) % 5 == 0 and p["is_duplicate"] == 1]  # type: ignore[call-overload]
    probes = [(str(p["question1"]), str(p["question2"])) for p in held_out if p["question1"] != p["question2"]]
    probes = probes[:limit]
    return probes, list(dict.fromkeys(q for pair in probes for q in pair))


def exact_duplicate_rankings(
    vectors: np.ndarray, questions: list[str], probes: list[tuple[str, str]]
) -> list[list[str]]:
    """Each probe's 10 nearest other questions by exact dot product of ``vectors`` (rows of ``questions``)."""
    index = {q: i for i, q in enumerate(questions)}
    rankings = []
    for query, _ in probes:
        scores = vectors @ vectors[index[query]]
        scores[index[query]] = -np.inf
        order = np.argsort(-scores, kind="stable")[:10]
        rankings.append([questions[i] for i in order])
    return rankings


def mrr_at_10(rankings: list[list[str]], probes: list[tuple[str, str]]) -> float:
    """Mean reciprocal rank of each probe's partner in the first 10 of its ranking (the query itself left out)."""
    return float(
        np.mean(
            [
                next((1 / r for r, text in enumerate(ranked[:10], 1) if text == partner), 0.0)
                for ranked, (_, partner) in zip(rankings, probes, strict=True)
            ]
        )
    )


def read_scifact(
    folder: Path, limit: int | None = None
) -> tuple[list[str], list[str], dict[str, str], dict[str, set[str]]]:
    """BEIR SciFact's corpus and train split: (doc ids, doc texts, {query id: text}, {query id: relevant doc ids}).

    Document text is ``title + " " + text``, BEIR's usual input for dense models. limit: the first ``limit``
    documents only (None: all), with the judgements restricted to them; queries are those with a judgement left.
    """
    doc_ids: list[str] = []
    texts: list[str] = []
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(doc_ids) >= limit:
                break
            doc = json.loads(line)
            doc_ids.append(doc["_id"])
            texts.append(f"{doc['title']} {doc['text']}")
    known = set(doc_ids)
    qrels: dict[str, set[str]] = {}
    with open(folder / "qrels" / "train.tsv", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if int(row["score"]) > 0 and row["corpus-id"] in known:
                qrels.setdefault(row["query-id"], set()).add(row["corpus-id"])
    queries = {}
    with open(folder / "queries_train.jsonl", encoding="utf-8") as f:
        for line in f:
            query = json.loads(line)
            if query["_id"] in qrels:
                queries[query["_id"]] = query["text"]
    return doc_ids, texts, queries, {q: qrels[q] for q in queries}


def cpu_summary() -> str:
    """The CPU's model and the flags that decide encoder speed (speed figures are only comparable within a run)."""
    return cpu.summary()
