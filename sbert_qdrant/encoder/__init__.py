"""The SBERT encoder: Transformer -> Pooling -> [Dense] -> [Normalize]; the CrossEncoder; the MultiVectorEncoder
(late interaction); BM25 sparse term weights;
static int8 behind one door (``int8/``) and the one CPU probe (``cpu.py``)."""

from __future__ import annotations

from ..types import PRECISIONS, Precision
from .configured import EncoderSpec, LoadOptions, load_encoder
from .cross_encoder import CrossEncoder, RankedText
from .encoder import SentenceEncoder
from .layers import Dense, Normalize
from .loading import DEFAULT_MODEL, resolve_model_folder
from .multivector import MultiVectorEncoder
from .pooling import POOLING_MODES, AttentionPooling, Pooling, WeightedLayerPooling
from .sparse import Bm25
from .transformer import Transformer

__all__ = [
    "DEFAULT_MODEL",
    "POOLING_MODES",
    "PRECISIONS",
    "AttentionPooling",
    "Bm25",
    "CrossEncoder",
    "Dense",
    "EncoderSpec",
    "LoadOptions",
    "MultiVectorEncoder",
    "Normalize",
    "Pooling",
    "Precision",
    "RankedText",
    "SentenceEncoder",
    "Transformer",
    "WeightedLayerPooling",
    "load_encoder",
    "resolve_model_folder",
]
