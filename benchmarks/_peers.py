"""Peer encoders in their own Python environments, driven through long-lived worker processes, and the timing rule
that repeats calls another process starved of CPU.

Setup, once: ``bash benchmarks/peers/setup.sh`` (env ``benchmarks/peers/.venv-st`` and the model exports under
``benchmarks/peers/.cache``). Smoke check (main env): ``.venv/bin/python benchmarks/_peers.py --smoke``.

    peers = available_peers(model_folder)            # {engine kind: factory}, prints what is missing
    with peers["st-onnx"]() as engine:               # starts benchmarks/peers/worker.py in the peer env
        vectors = engine.encode(texts, batch_size=32)   # float32, input order
        timing = timed_call(lambda t: engine.encode_timed(t, 32), texts, threads=2, key="st-onnx")

Timing rule (``StarvationGuard``): for each call the engine's process reports its wall time, its own CPU time
(``time.process_time``, all its threads) and the CPU time the rest of the machine used meanwhile (``/proc/stat``
busy time less its own). Its utilization is ``u = cpu / (wall * threads)``. A call counts as starved when other
processes used more than ``max_others`` of a core on average during it (``others / wall > max_others``, default
0.25), or when ``u`` fell below ``tolerance`` (default 0.8) times the highest ``u`` that engine has shown so far
(another process took the cores the engine wanted: wall grows, CPU work does not). A starved call is repeated,
up to ``max_tries`` attempts (default 3); the fastest attempt is kept, and ``Timing.starved`` stays True when
every attempt was starved (report it rather than trust it). In-process engines are measured the same way around
the call in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

BENCHMARKS = Path(__file__).resolve().parent
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from peers.export import OV_FILE, OV_INT8_FILE, model_cache  # noqa: E402
from peers.worker import ONNX_FILE, busy_seconds, read_frame, write_frame  # noqa: E402

PEERS_DIR = BENCHMARKS / "peers"
WORKER = PEERS_DIR / "worker.py"
DEFAULT_CACHE = PEERS_DIR / ".cache"
DEFAULT_PYTHON = PEERS_DIR / ".venv-st" / "bin" / "python"
READY_MARKER = "sbert-qdrant-peers-ready"  # written into the env folder by setup.sh once its imports work
SETUP_COMMAND = "bash benchmarks/peers/setup.sh"

PEER_LABELS: dict[str, str] = {
    "st": "sentence-transformers torch fp32",
    "st-onnx": "sentence-transformers ONNX (optimum export)",
    "st-openvino": "sentence-transformers OpenVINO (default config)",
    "st-openvino-int8": "sentence-transformers OpenVINO static int8",
    "fastembed": "FastEmbed (same ONNX export)",
}
# the file each engine loads, relative to the exported model folder
_ENGINE_FILES: dict[str, str] = {
    "st": "modules.json",
    "st-onnx": ONNX_FILE,
    "st-openvino": OV_FILE,
    "st-openvino-int8": OV_INT8_FILE,
    "fastembed": f"fastembed/{ONNX_FILE}",
}


class PeerError(RuntimeError):
    """A peer worker failed to start or to answer."""


@dataclass
class EncodeResult:
    """Vectors of one encode call with the worker-side measures of the call itself."""

    vectors: np.ndarray
    wall_s: float
    cpu_s: float
    others_s: float | None


class PeerEngine:
    """A long-lived worker process (``benchmarks/peers/worker.py``) encoding with one peer engine."""

    def __init__(
        self,
        name: str,
        python_executable: str | Path,
        engine_kind: str,
        model_folder: str | Path,
        cache_dir: str | Path = DEFAULT_CACHE,
        threads: int = 2,
    ) -> None:
        self.name = name
        self.engine_kind = engine_kind
        self.threads = threads
        self.folder = model_cache(Path(model_folder), Path(cache_dir))
        log_dir = Path(cache_dir) / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{engine_kind}.log"
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(threads)
        env.update(TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        env.pop("PYTHONPATH", None)
        # OpenVINO's CPU plugin cannot compile the model under oneDNN's ISA limit (no Softmax implementation) and ONNX
        # Runtime has none: under an emulated AVX2 run the peers keep the CPU's full ISA (flattering them; said there)
        env.pop("ONEDNN_MAX_CPU_ISA", None)
        start = time.perf_counter()
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                [str(python_executable), str(WORKER), engine_kind, str(self.folder), "--threads", str(threads)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
            )
        header = self._read_header()
        self.startup_s = time.perf_counter() - start
        self.info: dict[str, Any] = header.get("info", {})

    def _read_header(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        frame = read_frame(self._proc.stdout)
        if frame is None:
            self._proc.wait(timeout=30)
            raise PeerError(f"{self.name}: worker exited ({self._proc.returncode}); log tail:\n{self._log_tail()}")
        header = json.loads(frame)
        if not header.get("ok"):
            raise PeerError(f"{self.name}: {header.get('error')}; log tail:\n{self._log_tail()}")
        return header

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _request(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdin is not None
        if self._proc.poll() is not None:
            raise PeerError(f"{self.name}: worker is not running; log tail:\n{self._log_tail()}")
        write_frame(self._proc.stdin, json.dumps(request).encode())
        self._proc.stdin.flush()
        return self._read_header()

    def encode_timed(self, texts: list[str], batch_size: int) -> EncodeResult:
        """Encode ``texts``; the result carries the worker's wall, CPU and other-processes seconds for the call."""
        header = self._request({"op": "encode", "texts": list(texts), "batch_size": batch_size})
        assert self._proc.stdout is not None
        payload = read_frame(self._proc.stdout)
        if payload is None:
            raise PeerError(f"{self.name}: worker closed the pipe mid-reply; log tail:\n{self._log_tail()}")
        vectors = np.frombuffer(payload, dtype=np.float32).reshape(header["shape"])
        return EncodeResult(vectors, header["wall_s"], header["cpu_s"], header["others_s"])

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        """Float32 vectors of ``texts``, in input order."""
        return self.encode_timed(texts, batch_size).vectors

    def close(self) -> None:
        """Ask the worker to stop; kill it if it does not within 10 s."""
        if self._proc.poll() is None:
            try:
                self._request({"op": "close"})
                self._proc.wait(timeout=10)
            except (PeerError, OSError, subprocess.TimeoutExpired, ValueError):
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()

    def __enter__(self) -> PeerEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def available_peers(
    model_folder: str | Path,
    threads: int = 2,
    python_executable: str | Path = DEFAULT_PYTHON,
    cache_dir: str | Path = DEFAULT_CACHE,
    engines: tuple[str, ...] = tuple(PEER_LABELS),
    verbose: bool = True,
) -> dict[str, Callable[[], PeerEngine]]:
    """Factories of the peers that setup produced, by engine kind; prints a line for each missing one."""
    python = Path(python_executable)
    ready = (python.parent.parent / READY_MARKER).exists()
    folder = model_cache(Path(model_folder), Path(cache_dir))
    found: dict[str, Callable[[], PeerEngine]] = {}
    for kind in engines:
        if not ready:
            reason = f"no ready peer env at {python.parent.parent}"
        elif not (folder / _ENGINE_FILES[kind]).exists():
            reason = f"no export {folder / _ENGINE_FILES[kind]}"
        else:
            found[kind] = _factory(PEER_LABELS[kind], python, kind, Path(model_folder), Path(cache_dir), threads)
            continue
        if verbose:
            command = f"{SETUP_COMMAND} {model_folder}"
            print(f"peer {kind} ({PEER_LABELS[kind]}) missing: {reason}; create it with: {command}")
    return found


def _factory(name: str, python: Path, kind: str, model: Path, cache: Path, threads: int) -> Callable[[], PeerEngine]:
    return lambda: PeerEngine(name, python, kind, model, cache, threads)


@dataclass
class Timing:
    """The kept attempt of a timed call: wall seconds (what to report) and how it was judged."""

    seconds: float
    cpu_s: float
    others_s: float | None
    utilization: float
    tries: int
    starved: bool
    vectors: np.ndarray | None = None


@dataclass
class StarvationGuard:
    """The repeat rule of the module docstring; keeps each engine's best utilization under its key."""

    max_tries: int = 3
    tolerance: float = 0.8
    max_others: float = 0.25
    best_utilization: dict[str, float] = field(default_factory=dict)

    def starved(self, key: str, wall_s: float, cpu_s: float, others_s: float | None, threads: int) -> bool:
        """Judge one call and update the engine's reference utilization."""
        utilization = cpu_s / (wall_s * threads) if wall_s > 0 else 1.0
        reference = max(self.best_utilization.get(key, 0.0), utilization)
        self.best_utilization[key] = reference
        crowded = others_s is not None and wall_s > 0 and others_s / wall_s > self.max_others
        return crowded or utilization < self.tolerance * reference


DEFAULT_GUARD = StarvationGuard()


def timed_call(
    fn: Callable[[list[str]], np.ndarray | EncodeResult],
    texts: list[str],
    threads: int,
    key: str | None = None,
    guard: StarvationGuard = DEFAULT_GUARD,
) -> Timing:
    """Time ``fn(texts)`` under ``guard``'s repeat rule. ``fn`` returns an ``EncodeResult`` (a peer: its worker's
    measures are used) or an array (an in-process engine: measured here, around the call)."""
    key = key or getattr(fn, "__qualname__", repr(fn))
    best: Timing | None = None
    for attempt in range(1, guard.max_tries + 1):
        busy0, cpu0, wall0 = busy_seconds(), time.process_time(), time.perf_counter()
        out = fn(texts)
        wall1, cpu1, busy1 = time.perf_counter(), time.process_time(), busy_seconds()
        if isinstance(out, EncodeResult):
            wall, cpu, others, vectors = out.wall_s, out.cpu_s, out.others_s, out.vectors
        else:
            wall, cpu, vectors = wall1 - wall0, cpu1 - cpu0, np.asarray(out)
            others = None if busy0 is None or busy1 is None else max(0.0, busy1 - busy0 - cpu)
        starved = guard.starved(key, wall, cpu, others, threads)
        utilization = cpu / (wall * threads) if wall > 0 else 1.0
        if best is None or wall < best.seconds:
            best = Timing(wall, cpu, others, utilization, attempt, starved, vectors)
        best.tries = attempt
        best.starved = best.starved and starved
        if not starved:
            break
    assert best is not None
    return best


def _smoke(args: argparse.Namespace) -> None:
    """Start each available peer, encode ``args.texts`` STS-B sentences, compare with ST fp32 in this env."""
    import torch
    from _data import read_stsb
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    model_folder = args.model
    if model_folder is None:
        from sbert_qdrant.encoder.loading import resolve_model_folder

        model_folder = resolve_model_folder(None)
    s1, s2, _ = read_stsb(args.data / "stsb" / "stsb_dev.tsv.gz")
    texts = list(dict.fromkeys(s1 + s2))[: args.texts]
    anchor = SentenceTransformer(str(model_folder), device="cpu")
    anchor.encode(texts[:8], batch_size=args.batch_size)
    ref = timed_call(lambda t: anchor.encode(t, batch_size=args.batch_size), texts, args.threads, key="main-st")
    assert ref.vectors is not None
    reference = ref.vectors / np.linalg.norm(ref.vectors, axis=1, keepdims=True)
    print(f"{len(texts)} STS-B dev sentences, batch {args.batch_size}, {args.threads} threads, model {model_folder}")
    _smoke_line("main-env sentence-transformers fp32 (anchor)", ref, 1.0, len(texts), None)
    for kind, start in available_peers(model_folder, threads=args.threads).items():
        try:
            with start() as engine:
                engine.encode(texts[:8], args.batch_size)  # warm-up
                timing = timed_call(lambda t: engine.encode_timed(t, args.batch_size), texts, args.threads, key=kind)
                assert timing.vectors is not None
                vectors = timing.vectors / np.linalg.norm(timing.vectors, axis=1, keepdims=True)
                cosine = float((vectors * reference).sum(axis=1).min())
                _smoke_line(f"{kind}: {engine.name}", timing, cosine, len(texts), engine)
        except PeerError as exc:
            print(f"{kind}: FAILED {exc}")


def _smoke_line(label: str, timing: Timing, cosine: float, n: int, engine: PeerEngine | None) -> None:
    others = "n/a" if timing.others_s is None else f"{timing.others_s / timing.seconds:.2f}"
    extra = ""
    if engine is not None:
        facts = {k: v for k, v in engine.info.items() if k.startswith("ov_inference") or k in ("pooling",)}
        extra = f"  start {engine.startup_s:.1f}s {facts if facts else ''}"
    print(
        f"  {label:<62} min cos {cosine:.5f}  {n / timing.seconds:7.1f} sent/s  "
        f"util {timing.utilization:.2f} others {others} tries {timing.tries}"
        f"{' STARVED' if timing.starved else ''}{extra}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="start each available peer and check it")
    parser.add_argument("--data", type=Path, default=BENCHMARKS.parent.parent / "shared" / "data")
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: the package's default)")
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.smoke:
        _smoke(args)
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
