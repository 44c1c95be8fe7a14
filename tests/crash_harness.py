"""Kill ``sbert-qdrant index`` with SIGKILL at many points of its progress, re-running the same command each time.

    python tests/crash_harness.py RECORDS.jsonl MODEL_DIR WORK_DIR --kills 8
    python tests/crash_harness.py NEW.jsonl MODEL_DIR WORK_DIR --kills 8 --documents --replace OLD.jsonl

One process imports the package once, then forks a fresh child for every run: a clean run into ``WORK_DIR/clean``,
then ``--kills`` runs into ``WORK_DIR/crashed``, each SIGKILLed a random fraction of a batch interval after its j-th
batch write landed, j spread over the whole load (``--on-conflict overwrite``; every fourth run ``skip``, killed
after its first write), then one last run of the same command to the end. With ``--replace OLD``, every run starts
from a folder holding OLD's documents (``WORK_DIR/base``, copied): the clean run replaces them with RECORDS' to the
end; each killed run (into ``WORK_DIR/killed-K``) is followed by the same command run to the end, in that folder.
Kill points are counted in writes, so a slow or busy machine moves them little (only the sub-batch delay is clock
time). The child reports each landed write through a pipe: an observer wrapped around the Edge store's ``upsert``
that adds nothing else. The caller compares the folders. Prints one JSON line: each kill point (writes landed
before the kill) and how its run ended. Its progress goes to stderr as it happens (a dot per landed write, a line per
run), so that a caller can bound it by progress rather than by the clock.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from sbert_qdrant.cli import main as cli
from sbert_qdrant.store.edge import EdgeStore


def _child(argv: list[str], report_fd: int) -> None:
    original = EdgeStore.upsert

    def reporting_upsert(self: EdgeStore, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        os.write(report_fd, b".")  # this batch has landed

    EdgeStore.upsert = reporting_upsert  # type: ignore[method-assign]
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os._exit(cli(argv))


def _run(argv: list[str], kill_after_writes: int | None = None, delay: float = 0.0) -> tuple[int, list[float]]:
    """Fork a child running the CLI; SIGKILL it ``delay`` s after its ``kill_after_writes``-th write landed.

    Returns the exit code (or -signal) and the times at which its writes landed.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(argv, write_fd)
    os.close(write_fd)
    landed: list[float] = []
    while kill_after_writes is None or len(landed) < kill_after_writes:
        chunk = os.read(read_fd, 4096)
        if not chunk:  # the child closed the pipe: it ended
            break
        landed += [time.perf_counter()] * chunk.count(b".")
        sys.stderr.write("." * chunk.count(b"."))
        sys.stderr.flush()
    else:
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(read_fd)
    code = os.waitstatus_to_exitcode(status)
    print(f" run ended with {code} after {len(landed)} writes", file=sys.stderr, flush=True)
    return code, landed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("records", type=Path)
    parser.add_argument("model", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--documents", action="store_true", help="index --documents (long texts chunked)")
    parser.add_argument("--replace", type=Path, default=None, help="kill runs that replace these documents")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    def command(folder: str, on_conflict: str, records: Path = args.records) -> list[str]:
        return [
            "index", str(records), "--id-field", "id", "--model", str(args.model), "--device", "cpu",
            "--location", str(args.work / folder), "--collection", "crash", "--batch-size", str(args.batch_size),
            "--on-conflict", on_conflict, "--no-optimize", "--no-progress",
            *(["--documents", "--chunk-tokens", "24"] if args.documents else []),
        ]  # fmt: skip

    if args.replace is not None:
        _replacements(args, command, rng)
        return
    start = time.perf_counter()
    code, landed = _run(command("clean", "overwrite"))
    clean_seconds = time.perf_counter() - start
    if code != 0 or len(landed) < 4:
        raise SystemExit(f"the clean run failed with exit code {code} after {len(landed)} writes (need >= 4)")
    batches = len(landed)
    batch_seconds = (landed[-1] - landed[0]) / (batches - 1)
    kills = []
    for k in range(args.kills):
        # Overwrite runs die after write j, j spread from the first write to the last but one; skip runs resume what
        # is missing and die after their first write. A skip run with nothing left to write is replaced by an
        # overwrite run at the same j, so that every kill point lands mid-run.
        # An overwrite run that still ends first (its delay outlasted the rest of the run) is tried once more at once.
        j = 1 + math.floor(k * (batches - 1) / args.kills)
        delay = rng.uniform(0, batch_seconds / 2)  # somewhere in encoding or writing the next batch
        tries = [("skip", 1, delay)] if k % 4 == 3 else []
        for on_conflict, after, wait in [*tries, ("overwrite", j, delay), ("overwrite", j, 0.0)]:
            code, landed = _run(command("crashed", on_conflict), kill_after_writes=after, delay=wait)
            if code == -signal.SIGKILL:
                break
        kills.append({"on_conflict": on_conflict, "after_writes": len(landed), "delay": wait, "outcome": code})
    final, _ = _run(command("crashed", "skip"))
    print(json.dumps({"clean_seconds": clean_seconds, "batches": batches, "kills": kills, "final": final}))


def _replacements(args: argparse.Namespace, command: Any, rng: random.Random) -> None:
    """Kill runs that replace OLD's documents by RECORDS', each from a copy of the same starting folder."""
    code, _ = _run(command("base", "overwrite", args.replace))
    if code != 0:
        raise SystemExit(f"indexing {args.replace} failed with exit code {code}")
    shutil.copytree(args.work / "base", args.work / "clean")
    code, landed = _run(command("clean", "overwrite"))
    if code != 0 or len(landed) < 4:
        raise SystemExit(f"the clean replacement failed with exit code {code} after {len(landed)} writes (need >= 4)")
    batches = len(landed)
    batch_seconds = (landed[-1] - landed[0]) / (batches - 1)
    kills = []
    for k in range(args.kills):
        folder = f"killed-{k}"
        j = 1 + math.floor(k * (batches - 1) / args.kills)
        delay = rng.uniform(0, batch_seconds / 2) if k % 2 else 0.0  # at once: between a write and its clean-up
        for wait in (delay, 0.0):  # a run that ended before its kill is tried again from the start, killed at once
            shutil.rmtree(args.work / folder, ignore_errors=True)
            shutil.copytree(args.work / "base", args.work / folder)
            code, landed = _run(command(folder, "overwrite"), kill_after_writes=j, delay=wait)
            if code == -signal.SIGKILL:
                break
        final, _ = _run(command(folder, "overwrite"))
        kills.append({"folder": folder, "after_writes": len(landed), "delay": wait, "outcome": code, "final": final})
    print(json.dumps({"batches": batches, "kills": kills}))


if __name__ == "__main__":
    main()
