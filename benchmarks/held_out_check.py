"""How hard adapt_to_corpus's held-out check is: the base model's held-out nDCG@10 (dense, hybrid) on SciFact's
pseudo-queries, as the trained pairs are (the old check) and made harder (``harder_queries``: words dropped, only
those whose text BM25 ranks second or lower, or misses), before any training. A check the base model already passes
at 95 or more cannot show what training does (issue 55: the old one read +1.56 where real claims fell).

    cd benchmarks && python held_out_check.py --data ../../shared/data [--docs 2000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _data import cpu_summary
from adapt import quiet_library_logs, read_corpus

from sbert_qdrant import SentenceEncoder, TextCollection
from sbert_qdrant.adaptation.held_out import HeldOutPool, held_out_split
from sbert_qdrant.training.pseudo_queries import harder_queries, pseudo_queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--held-out", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=256)
    args = parser.parse_args()
    quiet_library_logs()
    corpus = read_corpus(args.data / "scifact" / "corpus.jsonl.gz", args.docs)
    print(f"# {cpu_summary()}; {len(corpus.ids)} abstracts, {args.held_out} held-out texts")
    encoder = SentenceEncoder.load(max_seq_length=args.tokens)
    start = time.perf_counter()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder, TextCollection("scifact", encoder, location=folder) as coll:
        coll.upsert_texts(corpus.texts, ids=corpus.ids, payloads=[{"title": t} for t in corpus.titles])
        found = pseudo_queries(coll, max_pairs=2000)
        test, _ = held_out_split(found.pairs, args.held_out, 42)
        hard = harder_queries(coll, test)
        for label, pairs in (("confirmed", test), ("harder", hard.pairs)):
            with tempfile.TemporaryDirectory() as scratch:
                scores = HeldOutPool(coll, pairs, 10, Path(scratch), False).scores(encoder)
            figures |= {f"{label}_{mode}": round(value, 2) for mode, value in scores.items()}
            figures[f"{label}_queries"] = len(pairs)
        figures["harder_dropped_too_easy"] = hard.too_easy
        figures["harder_dropped_too_short"] = hard.too_short
    figures["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
