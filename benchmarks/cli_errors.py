"""How fast the command line refuses a wrong flag value or field, as a whole process (issue 64): each case is a
fresh ``sbert-qdrant`` run that must exit 2 with one line naming the flag, before any heavy import or model load.
Each case's wall time is the median of ``--runs``; beside them, the anchors in the same run: a bare ``python -c
pass`` and ``sbert-qdrant --version`` (the floor every case pays), and one search that loads the model (what a
refusal after the load would cost). Target: every case <= 0.5 s on an idle 2-core machine.

    python benchmarks/cli_errors.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _data import cpu_summary

COMMAND = [sys.executable, "-m", "sbert_qdrant"]
TARGET_S = 0.5


def cases(folder: Path) -> list[tuple[str, list[str], str]]:
    """(name, arguments, words the one error line must hold): each a flag value or a field the command refuses."""
    rows, missing = str(folder / "rows.jsonl"), str(folder / "no-such-model")
    engine = ["--location", str(folder / "store")]
    search = ["search", "a cat", *engine]
    index = ["index", rows, *engine, "--collection", "new"]
    return [
        ("search --limit 0", [*search, "--limit", "0"], "--limit=0"),
        ("search --offset -1", [*search, "--offset", "-1"], "--offset=-1"),
        ("search --candidates 2 --limit 5", [*search, "--candidates", "2"], "--candidates=2"),
        ("search --diversity 2", [*search, "--diversity", "2"], "--diversity=2"),
        ("search --fusion rrf (dense)", [*search, "--fusion", "rrf"], "--fusion='rrf'"),
        ("search --weights 1 2 (dense)", [*search, "--weights", "1", "2"], "--weights="),
        ("search --threshold 2 (dense)", [*search, "--threshold", "2"], "--threshold=2"),
        ("search --rerank-weight 0.5", [*search, "--rerank-weight", "0.5"], "--rerank-weight=0.5"),
        ("search --rerank MISSING", [*search, "--rerank", missing], "--rerank"),
        ("search --where bad", [*search, "--where", "bad"], "--where 'bad'"),
        ("search --hnsw-ef 0", [*search, "--hnsw-ef", "0"], "--hnsw-ef"),
        ("search --oversampling 0", [*search, "--oversampling", "0"], "--oversampling"),
        ("search --chunks 2 (texts)", [*search, "--chunks", "2"], "--chunks"),
        ("search --documents --chunks 0", [*search, "--documents", "--chunks", "0"], "--chunks=0"),
        ("search --collection missing", [*search, "--collection", "nope"], "--collection"),
        ("search --device nonsense", [*search, "--device", "nonsense"], "--device"),
        ("index --text-field txt", [*index, "--text-field", "txt"], "--text-field"),
        ("index --id-field key", [*index, "--id-field", "key"], "--id-field"),
        ("index --payload-fields titel", [*index, "--payload-fields", "titel"], "--payload-fields"),
        ("index --documents --context-field titel", [*index, "--documents", "--context-field", "titel"], "titel"),
        ("index --batch-size 0", [*index, "--batch-size", "0"], "--batch-size"),
        ("index --documents --chunk-tokens 0", [*index, "--documents", "--chunk-tokens", "0"], "--chunk-tokens"),
        ("index --documents --chunk-tokens 1000", [*index, "--documents", "--chunk-tokens", "1000"], "--chunk-tok"),
        ("index --documents --overlap-tokens -1", [*index, "--documents", "--overlap-tokens", "-1"], "--overlap"),
        ("index --first-stage-dim 0", [*index, "--first-stage-dim", "0"], "--first-stage-dim"),
        ("index missing file", ["index", str(folder / "none.jsonl"), *engine], "none.jsonl"),
        ("dedup --top-k 0", ["dedup", *engine, "--top-k", "0"], "--top-k"),
        ("dedup --limit 0", ["dedup", *engine, "--limit", "0"], "--limit"),
    ]


def run(arguments: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run([*COMMAND, *arguments], capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - start, done


def timed(arguments: list[str], env: dict[str, str], runs: int) -> tuple[float, subprocess.CompletedProcess[str]]:
    """The median wall time of ``runs`` runs after one warm-up, and the last run."""
    run(arguments, env)
    times, last = [], None
    for _ in range(runs):
        seconds, last = run(arguments, env)
        times.append(seconds)
    assert last is not None
    return statistics.median(times), last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "SBERT_QDRANT_DEVICE": "cpu"}
    print(f"# {cpu_summary()}; {os.cpu_count()} cores; median of {args.runs} runs per case (after one warm-up)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = [{"text": "a cat sat on the mat", "title": "Cats"}, {"text": "a dog barked", "title": "Dogs"}]
        (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        seconds, done = run(["index", str(folder / "rows.jsonl"), "--location", str(folder / "store")], env)
        assert done.returncode == 0, done.stderr
        anchors = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            ("sbert-qdrant --version", [*COMMAND, "--version"]),
        ]
        print(f"{'case':45} {'wall s':>7}  exit  ok  message")
        for name, command in anchors:
            times = []
            for _ in range(args.runs + 1):
                start = time.perf_counter()
                subprocess.run(command, capture_output=True, check=True, env=env)
                times.append(time.perf_counter() - start)
            print(f"{'anchor: ' + name:45} {statistics.median(times[1:]):7.3f}")
        search, _ = timed(["search", "a cat", "--location", str(folder / "store"), "--limit", "1"], env, 1)
        print(f"{'anchor: a search that loads the model':45} {search:7.3f}  (index of 2 rows: {seconds:.1f} s)")
        worst, failed = 0.0, []
        for name, arguments, words in cases(folder):
            median, done = timed(arguments, env, args.runs)
            lines = done.stderr.strip().splitlines()
            ok = done.returncode == 2 and len(lines) == 1 and words in done.stderr
            worst = max(worst, median)
            if not ok or median > TARGET_S:
                failed.append(name)
            message = lines[-1] if lines else "(nothing on stderr)"
            print(f"{name:45} {median:7.3f}  {done.returncode:>4}  {'yes' if ok else 'NO':>3}  {message[:150]}")
        print(
            f"slowest case {worst:.3f} s (target <= {TARGET_S} s); cases missing the target or the message: "
            f"{', '.join(failed) or 'none'}"
        )


if __name__ == "__main__":
    main()
