# The public names of sbert_qdrant, listed once: type checkers read them here, and __init__.py reads this file to
# import each on first use (PEP 562) and to build __all__. Add a public name here and nowhere else.
from .aio import AsyncTextCollection as AsyncTextCollection
from .collection import DuplicatePair as DuplicatePair
from .collection import TextCollection as TextCollection
from .dedup import Calibration as Calibration
from .documents import ChunkHit as ChunkHit
from .documents import DocumentHit as DocumentHit
from .documents import StoredDocument as StoredDocument
from .encoder import DEFAULT_MODEL as DEFAULT_MODEL
from .encoder import AttentionPooling as AttentionPooling
from .encoder import Bm25 as Bm25
from .encoder import CrossEncoder as CrossEncoder
from .encoder import Dense as Dense
from .encoder import Normalize as Normalize
from .encoder import Pooling as Pooling
from .encoder import RankedText as RankedText
from .encoder import SentenceEncoder as SentenceEncoder
from .encoder import Transformer as Transformer
from .encoder import WeightedLayerPooling as WeightedLayerPooling
from .encoder import load_encoder as load_encoder
from .encoder.similarity import quantize_embeddings as quantize_embeddings
from .encoder.similarity import similarity as similarity
from .encoder.similarity import similarity_pairwise as similarity_pairwise
from .errors import CollectionMismatchError as CollectionMismatchError
from .errors import CollectionNotFoundError as CollectionNotFoundError
from .errors import DataFormatError as DataFormatError
from .errors import InvalidArgumentError as InvalidArgumentError
from .errors import InvalidInputError as InvalidInputError
from .errors import ModelLoadError as ModelLoadError
from .errors import ModelNotFoundError as ModelNotFoundError
from .errors import PartialWriteError as PartialWriteError
from .errors import SbertQdrantError as SbertQdrantError
from .errors import StoreError as StoreError
from .errors import StoreInUseError as StoreInUseError
from .errors import StoreUnavailableError as StoreUnavailableError
from .errors import UnsupportedError as UnsupportedError
from .layout import PointLayout as PointLayout
from .layout import VectorSlot as VectorSlot
from .records import Hit as Hit
from .records import StoredText as StoredText
from .records import TextRecord as TextRecord
from .records import UpsertResult as UpsertResult
from .settings import Settings as Settings
from .store import RetryPolicy as RetryPolicy

__version__: str
