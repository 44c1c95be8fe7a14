"""``sbert-qdrant build-kernels``: build static int8's native kernels ahead of time (e.g. in an image)."""

from __future__ import annotations

import argparse
import sys

from ..encoder import cpu
from ..encoder.int8 import build_library, kernels_folder, native_unsupported
from ..settings import Settings

_DESCRIPTION = """\
Build the native int8 kernels (int8 attention, activation quantization, residual add + LayerNorm of static int8)
into the cache folder ($SBERT_QDRANT_CACHE/kernels, default ~/.cache/sbert-qdrant/kernels), or find the library built
there before, and print its path on stdout (the CPU and whether it runs the kernels go to stderr). Later loads use
it without a compiler. The build host needs a C++ compiler ($CXX, c++, g++ or clang++), not an AVX512-VNNI CPU: an
image built elsewhere runs the kernels on the CPUs that have it.

Exit status: 0 when the library is there (or SBERT_QDRANT_NATIVE=off, which builds nothing); 2 when it cannot be
built (no compiler, a compiler error or timeout), with the reason. A build that failed before is tried again."""


def _build_kernels(_: argparse.Namespace) -> int:
    settings = Settings()
    print(f"CPU: {cpu.summary()}", file=sys.stderr)
    if settings.native == "off":
        print("SBERT_QDRANT_NATIVE=off: the native kernels are neither built nor loaded.", file=sys.stderr)
        return 0
    library = build_library(kernels_folder(settings), retry_failed=True)
    print(library)
    reason = native_unsupported(settings)
    used = "static int8 runs them on this CPU" if reason is None else f"not used on this CPU: {reason}"
    print(f"int8 kernels ready ({used}).", file=sys.stderr)
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    build = commands.add_parser(
        "build-kernels",
        help="build static int8's native kernels ahead of time (for images); print the library's path",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build.set_defaults(run=_build_kernels)
