"""Where Qdrant Edge keeps a collection on disk, read without the engine (so that a check loads no qdrant-client)."""

from __future__ import annotations

from pathlib import Path

#: A collection's folder under an Edge location holds this file once the collection exists.
CONFIG_FILE = Path("shard") / "edge_config.json"


def edge_collection_names(location: Path) -> list[str]:
    """The collections of an Edge folder, sorted (none where the folder does not exist)."""
    if not location.is_dir():
        return []
    return sorted(p.parent.parent.name for p in location.glob(f"*/{CONFIG_FILE.as_posix()}"))
