"""The SBERT encoder: Transformer -> Pooling -> [Dense] -> [Normalize]; the CrossEncoder; the MultiVectorEncoder
(late interaction); BM25 sparse term weights;
static int8 behind one door (``int8/``) and the one CPU probe (``cpu.py``).

The public names are listed once, in ``__init__.pyi``, and each is imported on first use (``sbert_qdrant._lazy``):
``from sbert_qdrant.encoder import Bm25`` loads no torch.
"""

from __future__ import annotations

from .._lazy import module_getattr as _module_getattr
from .._lazy import stub_names as _stub_names

_LAZY = _stub_names(__file__)
__getattr__ = _module_getattr(__name__, _LAZY, globals())
__all__ = list(_LAZY)
