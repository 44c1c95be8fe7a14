"""Qdrant engines behind one small protocol: Qdrant Edge (embedded) and qdrant-client (server, cloud, local).

The public names are listed once, in ``__init__.pyi``, and each is imported on first use (``sbert_qdrant._lazy``):
``sbert_qdrant.store.edge_folder`` (an Edge folder's collection names) loads no qdrant-client.
"""

from __future__ import annotations

from .._lazy import module_getattr as _module_getattr
from .._lazy import stub_names as _stub_names

_LAZY = _stub_names(__file__)
__getattr__ = _module_getattr(__name__, _LAZY, globals())
__all__ = list(_LAZY)
