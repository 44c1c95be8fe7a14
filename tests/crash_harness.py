"""Kill ``sbert-qdrant index`` with SIGKILL at many points, re-running the same command each time.

    python tests/crash_harness.py RECORDS.jsonl MODEL_DIR WORK_DIR --kills 20

One process imports the package once, then forks a fresh child for every run: a clean run into
``WORK_DIR/clean`` (timed), then ``--kills`` runs into ``WORK_DIR/crashed`` that are SIGKILLed at points spread over
that time (``--on-conflict overwrite``, every fourth ``skip``; a run that ends before its kill point is repeated
with half the delay), then one last run of the same command to the end.
The caller compares the two folders. Prints one JSON line: the kill delays and how the runs ended.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

from sbert_qdrant.cli import main as cli


def _run(argv: list[str], kill_after: float | None = None) -> tuple[int, float]:
    """Fork a child running the CLI; SIGKILL it after ``kill_after`` seconds. (exit code or -signal, seconds)."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os._exit(cli(argv))
    if kill_after is not None:
        deadline = start + kill_after
        while time.perf_counter() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status), time.perf_counter() - start
            time.sleep(0.005)
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("records", type=Path)
    parser.add_argument("model", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=50)
    args = parser.parse_args()

    def command(folder: str, on_conflict: str) -> list[str]:
        return [
            "index", str(args.records), "--id-field", "id", "--model", str(args.model), "--device", "cpu",
            "--location", str(args.work / folder), "--collection", "crash", "--batch-size", str(args.batch_size),
            "--on-conflict", on_conflict, "--no-optimize", "--no-progress",
        ]  # fmt: skip

    code, clean_seconds = _run(command("clean", "overwrite"))
    if code != 0:
        raise SystemExit(f"the clean run failed with exit code {code}")
    # Kill points spread over the first 80 % of a clean run; a run that finishes first is tried again sooner.
    delays = [clean_seconds * 0.8 * (k + 0.5) / args.kills for k in range(args.kills)]
    outcomes = []
    for k, delay in enumerate(delays):
        for _ in range(5):
            code, _ = _run(command("crashed", "skip" if k % 4 == 3 else "overwrite"), kill_after=delay)
            outcomes.append(code)
            if code == -signal.SIGKILL:
                break
            delay /= 2
    final, _ = _run(command("crashed", "skip"))
    print(json.dumps({"clean_seconds": clean_seconds, "delays": delays, "outcomes": outcomes, "final": final}))


if __name__ == "__main__":
    main()
