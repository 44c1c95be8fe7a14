"""Long-lived peer encoder, run by a peer env's python and driven by ``benchmarks/_peers.py`` over stdin/stdout.

    python worker.py ENGINE MODEL_FOLDER --threads 2

ENGINE: ``st`` (sentence-transformers, torch fp32), ``st-onnx`` (ONNX Runtime on ``onnx/model.onnx``),
``st-openvino`` (OpenVINO, default config: bf16 inference on CPUs with native bf16), ``st-openvino-int8``
(``openvino/openvino_model_qint8_quantized.xml``, static int8) or ``fastembed`` (FastEmbed on the same ONNX
file, in the ``fastembed/`` folder written by ``export.py``). MODEL_FOLDER is the exported folder under the cache.

Protocol, both ways: frames of a 4-byte little-endian length and that many bytes. A request is one frame of JSON:
``{"op": "encode", "texts": [...], "batch_size": 32}``, ``{"op": "info"}`` or ``{"op": "close"}``. A reply is a
JSON header frame (``ok``, ``error``, and for ``encode``: ``shape``, ``wall_s``, ``cpu_s``, ``others_s``) and,
for ``encode``, a second frame of the float32 vectors (C order, input order). ``wall_s`` and ``cpu_s`` are
``time.perf_counter`` and ``time.process_time`` around the encode call alone; ``others_s`` is the CPU time the
rest of the machine spent meanwhile (``/proc/stat`` busy time less ours; ``null`` where unreadable).

Library output never reaches the protocol: file descriptor 1 is pointed at stderr at start.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

ENGINES = ("st", "st-onnx", "st-openvino", "st-openvino-int8", "fastembed")
ONNX_FILE = "onnx/model.onnx"
OV_FILE = "openvino/openvino_model.xml"
OV_INT8_FILE = "openvino/openvino_model_qint8_quantized.xml"
_HEADER = struct.Struct("<I")


def read_frame(stream: BinaryIO) -> bytes | None:
    """One length-prefixed frame, or None at end of stream."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    body = stream.read(size)
    if len(body) < size:
        return None
    return body


def write_frame(stream: BinaryIO, body: bytes) -> None:
    """Write one length-prefixed frame (not flushed)."""
    stream.write(_HEADER.pack(len(body)))
    stream.write(body)


def busy_seconds() -> float | None:
    """Machine-wide non-idle CPU seconds since boot (all cores), from ``/proc/stat``; None where unreadable."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    busy = sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal; guest is inside user
    return busy / os.sysconf("SC_CLK_TCK")


def _set_env_threads(threads: int) -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        os.environ[var] = "1"


def load_engine(engine: str, folder: Path, threads: int) -> tuple[Callable[[list[str], int], np.ndarray], dict]:
    """The encode function ``(texts, batch_size) -> float32 array`` of ``engine`` and facts about it."""
    info: dict[str, Any] = {"engine": engine, "folder": str(folder), "threads": threads}
    if engine == "fastembed":
        return _load_fastembed(folder, threads, info)

    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    info["sentence_transformers"] = sentence_transformers.__version__
    info["torch"] = torch.__version__
    if engine == "st":
        model = SentenceTransformer(str(folder), device="cpu")
    elif engine == "st-onnx":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        kwargs = {"provider": "CPUExecutionProvider", "session_options": options, "file_name": ONNX_FILE}
        model = SentenceTransformer(str(folder), device="cpu", backend="onnx", model_kwargs=kwargs)
        info["onnxruntime"] = ort.__version__
    elif engine in ("st-openvino", "st-openvino-int8"):
        import openvino

        file_name = OV_FILE if engine == "st-openvino" else OV_INT8_FILE
        kwargs = {"file_name": file_name, "ov_config": {"INFERENCE_NUM_THREADS": str(threads)}}
        model = SentenceTransformer(str(folder), device="cpu", backend="openvino", model_kwargs=kwargs)
        info["openvino"] = openvino.__version__
        try:
            request = model[0].auto_model.request  # a CompiledModel in optimum-intel 1.27, an InferRequest before
            compiled = request if hasattr(request, "get_property") else request.get_compiled_model()
            precision = compiled.get_property("INFERENCE_PRECISION_HINT")
            info["ov_inference_precision"] = getattr(precision, "to_string", lambda: str(precision))()
            info["ov_num_threads"] = str(compiled.get_property("INFERENCE_NUM_THREADS"))
        except Exception as exc:  # noqa: BLE001 - facts only
            info["ov_properties_error"] = repr(exc)
    else:
        raise ValueError(f"unknown engine {engine!r}; one of {ENGINES}")
    info["max_seq_length"] = model.max_seq_length

    def encode(texts: list[str], batch_size: int) -> np.ndarray:
        return model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)

    return encode, info


def _load_fastembed(folder: Path, threads: int, info: dict) -> tuple[Callable[[list[str], int], np.ndarray], dict]:
    """FastEmbed's TextEmbedding on ``folder/fastembed`` (the ONNX export beside tokenizer files capped at the
    model's max_seq_length), registered as a custom model with the pooling and normalization of the ST folder."""
    import fastembed
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    normalize = any(m["type"].endswith(".Normalize") for m in modules)
    pooling_dir = next(m["path"] for m in modules if m["type"].endswith(".Pooling"))
    pooling_cfg = json.loads((folder / pooling_dir / "config.json").read_text(encoding="utf-8"))
    if pooling_cfg.get("pooling_mode_mean_tokens"):
        pooling = PoolingType.MEAN
    elif pooling_cfg.get("pooling_mode_cls_token"):
        pooling = PoolingType.CLS
    else:
        raise ValueError(f"pooling not supported by this worker: {pooling_cfg}")
    name = f"sbert-qdrant-local/{folder.name}"
    TextEmbedding.add_custom_model(
        model=name,
        pooling=pooling,
        normalization=normalize,
        sources=ModelSource(hf=name),
        dim=int(pooling_cfg["word_embedding_dimension"]),
        model_file=ONNX_FILE,
    )
    model = TextEmbedding(model_name=name, specific_model_path=str(folder / "fastembed"), threads=threads)
    info.update(fastembed=fastembed.__version__, pooling=pooling.name, normalize=normalize)

    def encode(texts: list[str], batch_size: int) -> np.ndarray:
        return np.stack(list(model.embed(texts, batch_size=batch_size)))

    return encode, info


def serve(engine: str, folder: Path, threads: int, inp: BinaryIO, out: BinaryIO) -> None:
    """Answer requests until ``close`` or end of input."""

    def reply(header: dict, payload: bytes | None = None) -> None:
        write_frame(out, json.dumps(header).encode())
        if payload is not None:
            write_frame(out, payload)
        out.flush()

    try:
        encode, info = load_engine(engine, folder, threads)
    except Exception as exc:  # noqa: BLE001 - reported to the driver
        traceback.print_exc()
        reply({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    reply({"ok": True, "info": info})
    while (frame := read_frame(inp)) is not None:
        request = json.loads(frame)
        op = request.get("op")
        if op == "close":
            reply({"ok": True})
            return
        if op == "info":
            reply({"ok": True, "info": info})
            continue
        if op != "encode":
            reply({"ok": False, "error": f"unknown op {op!r}"})
            continue
        try:
            texts = request["texts"]
            batch_size = int(request.get("batch_size", 32))
            busy0, cpu0, wall0 = busy_seconds(), time.process_time(), time.perf_counter()
            vectors = encode(texts, batch_size)
            wall1, cpu1, busy1 = time.perf_counter(), time.process_time(), busy_seconds()
            vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        except Exception as exc:  # noqa: BLE001 - reported to the driver
            traceback.print_exc()
            reply({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
            continue
        cpu = cpu1 - cpu0
        others = None if busy0 is None or busy1 is None else max(0.0, (busy1 - busy0) - cpu)
        header = {"ok": True, "shape": list(vectors.shape), "wall_s": wall1 - wall0, "cpu_s": cpu, "others_s": others}
        reply(header, vectors.tobytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("engine", choices=ENGINES)
    parser.add_argument("model_folder", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    _set_env_threads(args.threads)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed by the libraries goes to stderr
    sys.stdout = sys.stderr
    serve(args.engine, args.model_folder, args.threads, sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
