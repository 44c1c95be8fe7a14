"""Where Qdrant Edge keeps a collection on disk, read without the engine (so that a check loads no qdrant-client)."""

from __future__ import annotations

import json
from pathlib import Path

#: A collection's folder under an Edge location holds this file once the collection exists.
CONFIG_FILE = Path("shard") / "edge_config.json"


def edge_collection_names(location: Path) -> list[str]:
    """The collections of an Edge folder, sorted (none where the folder does not exist)."""
    if not location.is_dir():
        return []
    return sorted(p.parent.parent.name for p in location.glob(f"*/{CONFIG_FILE.as_posix()}"))


def edge_distances(location: Path, name: str) -> dict[str, str]:
    """The distance of each dense vector of the Edge collection ``name`` (lower case: cosine, dot, euclid, ...), as
    its config file records them; empty where it cannot be read."""
    try:
        vectors = json.loads((location / name / CONFIG_FILE).read_text(encoding="utf-8")).get("vectors", {})
        return {slot: str(spec["distance"]).lower() for slot, spec in vectors.items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}
