# The public names of sbert_qdrant.store, listed once: type checkers read them here, and __init__.py imports each
# on first use (sbert_qdrant._lazy), so that a light submodule (or a CLI check) loads no qdrant-client.
from ..types import Distance as Distance
from ..types import Quantization as Quantization
from .base import CollectionSpec as CollectionSpec
from .base import ScoredRecord as ScoredRecord
from .base import StoredRecord as StoredRecord
from .base import VectorSpec as VectorSpec
from .client_async import AsyncClientStore as AsyncClientStore
from .client_sync import ClientStore as ClientStore
from .edge import EdgeStore as EdgeStore
from .protocol_async import AsyncVectorStore as AsyncVectorStore
from .protocol_sync import VectorStore as VectorStore
from .retry import RetryPolicy as RetryPolicy
from .threaded import ThreadedStore as ThreadedStore
