"""``python -m sbert_qdrant.integrations.mcp [--transport ...]``: the same as ``sbert-qdrant mcp``."""

from __future__ import annotations

import sys

from ...cli import main

sys.exit(main(["mcp", *sys.argv[1:]]))
