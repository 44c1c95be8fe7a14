# The public names of sbert_qdrant.encoder, listed once: type checkers read them here, and __init__.py reads this
# file to import each on first use (PEP 562), so that the collections (which take BM25 from here) and a server that
# has not touched a model yet load no torch. Add a public name here and nowhere else.
from ..types import DEFAULT_MODEL as DEFAULT_MODEL
from ..types import PRECISIONS as PRECISIONS
from ..types import Precision as Precision
from .configured import EncoderSpec as EncoderSpec
from .configured import LoadOptions as LoadOptions
from .configured import load_encoder as load_encoder
from .cross_encoder import CrossEncoder as CrossEncoder
from .cross_encoder import RankedText as RankedText
from .encoder import SentenceEncoder as SentenceEncoder
from .layers import Dense as Dense
from .layers import Normalize as Normalize
from .loading import resolve_model_folder as resolve_model_folder
from .multivector import MultiVectorEncoder as MultiVectorEncoder
from .numpy_bert import NumpyEncoder as NumpyEncoder
from .pooling import POOLING_MODES as POOLING_MODES
from .pooling import AttentionPooling as AttentionPooling
from .pooling import Pooling as Pooling
from .pooling import WeightedLayerPooling as WeightedLayerPooling
from .sparse import Bm25 as Bm25
from .transformer import Transformer as Transformer

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
    "NumpyEncoder",
    "Pooling",
    "Precision",
    "RankedText",
    "SentenceEncoder",
    "Transformer",
    "WeightedLayerPooling",
    "load_encoder",
    "resolve_model_folder",
]
