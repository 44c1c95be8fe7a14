"""The string choices of the public API, each a ``Literal`` type with the tuple of its values, in one place.

```python
from sbert_qdrant.types import OnConflict, SearchMode
```
"""

from __future__ import annotations

from typing import Literal, get_args

#: The model loaded when none is named (a hub id).
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: The fewest tokens a document chunk may hold (``chunk_tokens``).
MIN_CHUNK_TOKENS = 8

#: Numeric precision of an encoder ("auto": the fastest exact-grade one of the hardware; see encoder/runtime.py).
Precision = Literal["auto", "fp32", "bf16", "fp16", "int8"]
PRECISIONS: tuple[Precision, ...] = get_args(Precision)

#: The static int8 native kernels: "auto" builds (or loads the cached) library where the CPU runs it; "off" never.
NativeKernels = Literal["auto", "off"]

#: The instructions oneDNN's int8 GEMMs run on a CPU: VNNI dot products, AVX2's vpmaddubsw (7-bit weights), or none.
Int8GemmIsa = Literal["vnni", "avx2", "none"]

#: The instruction set a build of the native int8 kernels targets.
KernelIsa = Literal["avx512_vnni", "avx2"]
KERNEL_ISAS: tuple[KernelIsa, ...] = get_args(KernelIsa)

#: What a write does with an id already stored: replace the point, or leave it as it is.
OnConflict = Literal["overwrite", "skip"]
ON_CONFLICTS: tuple[OnConflict, ...] = get_args(OnConflict)

#: How a collection is searched: dense vectors, BM25 sparse vectors, or both fused.
SearchMode = Literal["dense", "sparse", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = get_args(SearchMode)

#: How a hybrid search fuses its dense and sparse results (Qdrant's reciprocal rank / distribution-based fusion).
Fusion = Literal["rrf", "dbsf"]
FUSIONS: tuple[Fusion, ...] = get_args(Fusion)

#: The distance of a collection's dense vectors (Qdrant's).
Distance = Literal["cosine", "dot", "euclid", "manhattan"]
DISTANCES: tuple[Distance, ...] = get_args(Distance)

#: The kinds of a point's named vector slots: one dense vector, sparse term weights, or many dense vectors (MaxSim).
SlotKind = Literal["dense", "sparse", "multivector"]
SLOT_KINDS: tuple[SlotKind, ...] = get_args(SlotKind)

#: Whose point layout a collection has: ours, mcp-server-qdrant's (both writable), or another tool's (read-only).
LayoutOwner = Literal["sbert-qdrant", "mcp-server-qdrant", "foreign"]

#: How a collection stores its dense vectors, beside float32 originals (the encoder's int8 precision is another
#: matter): Qdrant's int8 scalar or binary quantization (1, 1.5 or 2 bits a value; searched codes re-scored by the
#: originals), or float16 storage instead of float32 (no originals kept).
Quantization = Literal["int8", "binary", "binary-1.5bit", "binary-2bit", "float16"]
QUANTIZATIONS: tuple[Quantization, ...] = get_args(Quantization)

#: What ``count`` counts: texts, documents, or the chunks of documents.
CountKind = Literal["texts", "documents", "chunks"]
COUNT_KINDS: tuple[CountKind, ...] = get_args(CountKind)

#: What ``stored_ids`` looks an id up as: a text, or a document.
IdKind = Literal["texts", "documents"]
ID_KINDS: tuple[IdKind, ...] = get_args(IdKind)

#: How a document's score comes from its chunks' scores: the best one, or their sum.
Scoring = Literal["max", "sum"]
SCORINGS: tuple[Scoring, ...] = get_args(Scoring)

#: The formats of text files read by ``sbert_qdrant.files`` and the CLI.
FileFormat = Literal["jsonl", "csv", "tsv", "txt"]
FILE_FORMATS: tuple[FileFormat, ...] = get_args(FileFormat)

#: The activation a CrossEncoder applies to its logits.
Activation = Literal["sigmoid", "identity", "softmax", "tanh"]

#: Numeric precision of training (no int8: int8 weights are not trained).
TrainPrecision = Literal["auto", "fp32", "bf16", "fp16"]

#: How training batches are drawn: at random, or keeping any text out of a batch that already holds it.
BatchSampler = Literal["random", "no_duplicates"]

#: What the label column of a training set holds: a class index, a similarity score, or 0/1.
LabelKind = Literal["class", "score", "binary"]

#: The distance of a triplet loss, by Qdrant's names (``models.Distance``): one vocabulary for training and store.
TripletDistance = Literal["euclid", "cosine", "manhattan"]
TRIPLET_DISTANCES: tuple[TripletDistance, ...] = get_args(TripletDistance)

__all__ = [
    "COUNT_KINDS",
    "DISTANCES",
    "FILE_FORMATS",
    "FUSIONS",
    "ID_KINDS",
    "KERNEL_ISAS",
    "ON_CONFLICTS",
    "PRECISIONS",
    "QUANTIZATIONS",
    "SCORINGS",
    "SEARCH_MODES",
    "TRIPLET_DISTANCES",
    "Activation",
    "BatchSampler",
    "CountKind",
    "Distance",
    "FileFormat",
    "Fusion",
    "IdKind",
    "Int8GemmIsa",
    "KernelIsa",
    "LabelKind",
    "NativeKernels",
    "OnConflict",
    "Precision",
    "Quantization",
    "Scoring",
    "SearchMode",
    "TrainPrecision",
    "TripletDistance",
]
