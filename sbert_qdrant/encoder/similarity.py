"""Comparing and shrinking output vectors as sentence-transformers does: ``similarity`` (every pair of two sets),
``similarity_pairwise`` (row by row) and ``quantize_embeddings`` (int8, uint8, binary, ubinary output vectors).

``quantize_embeddings`` changes the vectors an encoder returned, for storage elsewhere; it is not the compute
precision of ``SentenceEncoder.load(precision=...)`` (how the model runs) nor a collection's ``quantization=``
(Qdrant's own vector quantization), hence its argument ``to=`` where sentence-transformers says ``precision=``.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from ..errors import InvalidArgumentError

SimilarityFunction = Literal["cosine", "dot", "euclidean", "manhattan"]
OutputQuantization = Literal["float32", "int8", "uint8", "binary", "ubinary"]
SIMILARITY_FUNCTIONS: tuple[str, ...] = ("cosine", "dot", "euclidean", "manhattan")
OUTPUT_QUANTIZATIONS: tuple[str, ...] = ("float32", "int8", "uint8", "binary", "ubinary")


def _matrix(name: str, vectors: Any) -> np.ndarray:
    array = np.asarray(vectors.detach().cpu() if hasattr(vectors, "detach") else vectors, dtype=np.float32)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise InvalidArgumentError(f"{name} has shape {array.shape}; pass one vector or a (n, dim) matrix.")
    return array


def _pair(a: Any, b: Any, function: str) -> tuple[np.ndarray, np.ndarray]:
    if function not in SIMILARITY_FUNCTIONS:
        raise InvalidArgumentError(f"function={function!r} must be one of {SIMILARITY_FUNCTIONS}.")
    left, right = _matrix("embeddings1", a), _matrix("embeddings2", b)
    if left.shape[1] != right.shape[1]:
        raise InvalidArgumentError(
            f"embeddings1 has {left.shape[1]} dimensions and embeddings2 {right.shape[1]}: compare one model's vectors."
        )
    return left, right


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def similarity(embeddings1: Any, embeddings2: Any, function: SimilarityFunction = "cosine") -> np.ndarray:
    """Every pair's score, shape (n, m), as ``SentenceTransformer.similarity``: cosine, dot, or the negative
    euclidean / manhattan distance (higher is more similar throughout)."""
    a, b = _pair(embeddings1, embeddings2, function)
    if function == "cosine":
        return _unit(a) @ _unit(b).T
    if function == "dot":
        return a @ b.T
    differences = a[:, None, :] - b[None, :, :]
    if function == "euclidean":
        return -np.sqrt((differences**2).sum(axis=-1))
    return -np.abs(differences).sum(axis=-1)


def similarity_pairwise(embeddings1: Any, embeddings2: Any, function: SimilarityFunction = "cosine") -> np.ndarray:
    """Row i of one against row i of the other, shape (n,), as ``SentenceTransformer.similarity_pairwise``."""
    a, b = _pair(embeddings1, embeddings2, function)
    if len(a) != len(b):
        raise InvalidArgumentError(f"embeddings1 has {len(a)} rows and embeddings2 {len(b)}: pass as many of each.")
    if function == "cosine":
        return (_unit(a) * _unit(b)).sum(axis=1)
    if function == "dot":
        return (a * b).sum(axis=1)
    if function == "euclidean":
        return -np.sqrt(((a - b) ** 2).sum(axis=1))
    return -np.abs(a - b).sum(axis=1)


def quantize_embeddings(
    embeddings: Any,
    to: OutputQuantization,
    ranges: np.ndarray | None = None,
    calibration_embeddings: np.ndarray | None = None,
) -> np.ndarray:
    """Output vectors made small, as sentence-transformers' ``quantize_embeddings(embeddings, precision)``:
    ``"int8"`` / ``"uint8"``: each dimension's range (``ranges``, shape (2, dim): min and max; else measured on
    ``calibration_embeddings``, else on ``embeddings``) cut into 256 buckets; ``"binary"`` (int8, offset by 128) /
    ``"ubinary"`` (uint8): one bit per dimension (> 0), packed 8 to a byte; ``"float32"``: unchanged."""
    if to not in OUTPUT_QUANTIZATIONS:
        raise InvalidArgumentError(f"to={to!r} must be one of {OUTPUT_QUANTIZATIONS}.")
    single = np.ndim(embeddings) == 1
    vectors = _matrix("embeddings", embeddings)
    out = _quantized(vectors, to, ranges, calibration_embeddings)
    return out[0] if single else out


def _quantized(vectors: np.ndarray, to: str, ranges: np.ndarray | None, calibration: Any) -> np.ndarray:
    if to == "float32":
        return vectors
    if to in ("binary", "ubinary"):
        packed = np.packbits(vectors > 0, axis=-1)
        return (packed.astype(np.int16) - 128).astype(np.int8) if to == "binary" else packed
    if ranges is None:
        source = vectors if calibration is None else _matrix("calibration_embeddings", calibration)
        if len(source) < 2:
            raise InvalidArgumentError(
                f"{to} needs each dimension's range, which one vector cannot give: pass ranges= (shape (2, dim)) or "
                "calibration_embeddings= from a representative set."
            )
        ranges = np.vstack((source.min(axis=0), source.max(axis=0)))
    ranges = np.asarray(ranges, dtype=np.float32)
    starts = ranges[0, :]
    steps = (ranges[1, :] - starts) / 255
    steps = np.where(steps == 0, 1, steps)
    buckets = np.clip(np.floor((vectors - starts) / steps), 0, 255)
    return (buckets - 128).astype(np.int8) if to == "int8" else buckets.astype(np.uint8)
