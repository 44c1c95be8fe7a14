"""``python -m sbert_qdrant.integrations.mcp [--transport ...]``: the same as ``sbert-qdrant mcp``."""

from __future__ import annotations

import argparse
import sys

from ...errors import SbertQdrantError
from .command import DESCRIPTION, add_arguments, serve

parser = argparse.ArgumentParser(prog="python -m sbert_qdrant.integrations.mcp", description=DESCRIPTION)
add_arguments(parser)
try:
    sys.exit(serve(parser.parse_args()))
except SbertQdrantError as exc:
    sys.exit(f"{parser.prog}: error: {exc}")
