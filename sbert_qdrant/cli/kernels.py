"""``sbert-qdrant build-kernels``: build static int8's native kernels ahead of time (e.g. in an image)."""

from __future__ import annotations

import argparse
import sys

from ..types import KERNEL_ISAS

_DESCRIPTION = """\
Build the native int8 kernels (int8 attention, activation quantization, residual add + LayerNorm of static int8)
into the cache folder ($SBERT_QDRANT_CACHE/kernels, default ~/.cache/sbert-qdrant/kernels), one library per
instruction set (AVX512-VNNI, AVX2 + FMA), or find those built there before, and print their paths on stdout, one a
line (the CPU and which one it runs go to stderr). Later loads use them without a compiler. The build host needs a
C++ compiler ($CXX, c++, g++ or clang++), not such a CPU: an image built elsewhere runs the build its CPU can.

Exit status: 0 when the libraries are there (or SBERT_QDRANT_NATIVE=off, which builds nothing); 2 when one cannot be
built (no compiler, a compiler error or timeout), with the reason. A build that failed before is tried again."""


def _build_kernels(_: argparse.Namespace) -> int:
    from ..encoder import cpu  # torch: the CPU probe asks it what the CPU can do
    from ..encoder.int8 import build_library, kernels_folder, native_unsupported
    from ..settings import Settings

    settings = Settings()
    print(f"CPU: {cpu.summary()}", file=sys.stderr)
    if settings.native == "off":
        print("SBERT_QDRANT_NATIVE=off: the native kernels are neither built nor loaded.", file=sys.stderr)
        return 0
    for isa in KERNEL_ISAS:
        print(build_library(kernels_folder(settings), retry_failed=True, isa=isa))
    reason = native_unsupported(settings)
    used = f"static int8 runs the {cpu.kernel_isa()[0]} ones here" if reason is None else f"none used here: {reason}"
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
