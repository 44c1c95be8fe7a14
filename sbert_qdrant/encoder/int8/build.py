"""The native kernels' shared library, one per instruction set (``kernels/int8.cpp`` for AVX512-VNNI,
``kernels/int8_avx2.cpp`` for AVX2 + FMA, each with its own flags), built with the system's C++ compiler into the
cache folder once per instruction set, source, flags, compiler and platform.

A build runs under a file lock (N processes, say Ray actors, build once) with a time limit, writes a temporary file
renamed into place (atomic), and a failure is remembered beside it (no process retries it until the marker is
deleted or ``sbert-qdrant build-kernels`` runs). A cached library loads without a compiler: then any library built
from this source for this platform serves.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...errors import UnsupportedError
from ...types import KernelIsa

try:
    import fcntl
except ImportError:  # Windows: no flock; a build there still lands atomically
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("kernels") / "int8.cpp"
#: The header both sources include: part of every library's digest.
HEADER = SOURCE.with_name("dither.h")
_COMMON = ("-O3", "-shared", "-fPIC")
#: Per instruction set: the source and the flags it is compiled with.
KERNELS: dict[KernelIsa, tuple[Path, tuple[str, ...]]] = {
    "avx512_vnni": (SOURCE, (*_COMMON, "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mfma")),
    "avx2": (SOURCE.with_name("int8_avx2.cpp"), (*_COMMON, "-mavx2", "-mfma")),
}
#: Seconds a compile may run before it is stopped and remembered as failed (it takes about 1 s).
BUILD_TIMEOUT = 300.0
_FIX = "install a C++ compiler (g++ or clang++, or set $CXX), or set SBERT_QDRANT_NATIVE=off to stop trying"


def compiler() -> str | None:
    """The C++ compiler to build with: ``$CXX``, else c++, g++ or clang++ on the PATH."""
    candidates = [os.environ.get("CXX"), "c++", "g++", "clang++"]
    return next((found for name in candidates if name and (found := shutil.which(name))), None)


def compiler_identity(path: str) -> str:
    """The first line of ``path --version`` (e.g. "c++ (Debian 12.2.0-14) 12.2.0"), else the path itself."""
    try:
        run = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return path
    return next(iter(run.stdout.splitlines()), "") or path


def _digest(*parts: bytes | str) -> str:
    joined = b"\0".join(part.encode() if isinstance(part, str) else part for part in parts)
    return hashlib.blake2b(joined, digest_size=8).hexdigest()


def _stem(isa: KernelIsa) -> str:
    """``int8-<isa>-<source and flags>-<platform>``: the part of a library's name any compiler shares."""
    source, flags = KERNELS[isa]
    code = _digest(source.read_bytes(), HEADER.read_bytes(), *flags)
    return f"int8-{isa}-{code}-{platform.system().lower()}-{platform.machine().lower()}"


def library_path(folder: Path, compiler_path: str, isa: KernelIsa = "avx512_vnni") -> Path:
    """Where the ``isa`` library built by ``compiler_path`` lives in ``folder``."""
    return folder / f"{_stem(isa)}-{_digest(compiler_identity(compiler_path))}.so"


def cached_library(folder: Path, isa: KernelIsa = "avx512_vnni") -> Path | None:
    """An ``isa`` library built from its source for this platform by any compiler, newest first (None: none)."""
    built = sorted(folder.glob(f"{_stem(isa)}-*.so"), key=lambda path: path.stat().st_mtime, reverse=True)
    return built[0] if built else None


def build_library(folder: Path, retry_failed: bool = False, isa: KernelIsa = "avx512_vnni") -> Path:
    """The ``isa`` kernels' library in ``folder``: the one this compiler built, built now if missing (one process at a
    time), or, with no compiler or a folder it cannot write (a read-only image), one built earlier. Raises
    UnsupportedError (naming the reason and fix) where it cannot; a failed build is not tried again unless
    ``retry_failed``."""
    cxx = compiler()
    cached = cached_library(folder, isa) if folder.is_dir() else None
    if cxx is None:
        if cached is not None:
            return cached
        raise UnsupportedError(f"the int8 kernels need building and no C++ compiler was found; {_FIX}.")
    library = library_path(folder, cxx, isa)
    if library.is_file():
        return library
    try:
        return _build_once(cxx, library, retry_failed, isa)
    except UnsupportedError:
        if cached is not None:  # this compiler failed (now or before); another one's library serves
            return cached
        raise
    except OSError as exc:
        if cached is not None:
            return cached
        raise UnsupportedError(
            f"the int8 kernels cannot be built into {folder}: {exc}; make it writable or point "
            "SBERT_QDRANT_CACHE elsewhere."
        ) from exc


def _build_once(cxx: str, library: Path, retry_failed: bool, isa: KernelIsa) -> Path:
    """Build ``library`` with ``cxx`` unless another process did, or an earlier build failed."""
    library.parent.mkdir(parents=True, exist_ok=True)
    failed = library.with_suffix(".failed")
    with _locked(library.with_suffix(".lock")):
        if library.is_file():  # built by another process while this one waited
            return library
        if failed.is_file() and not retry_failed:
            raise UnsupportedError(
                f"an earlier build of the int8 kernels failed: {failed.read_text(encoding='utf-8')}; delete {failed} "
                "or run `sbert-qdrant build-kernels` to try again."
            )
        try:
            _compile(cxx, library, *KERNELS[isa])
        except UnsupportedError as exc:
            failed.write_text(str(exc), encoding="utf-8")
            raise
        failed.unlink(missing_ok=True)
    logger.info("built the int8 kernels into %s", library)
    return library


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (released when the process dies, so no stale lock stays)."""
    with path.open("a") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _compile(cxx: str, library: Path, source: Path, flags: tuple[str, ...]) -> None:
    """Compile ``source`` with ``cxx`` and ``flags`` to a temporary file beside ``library``, then rename it into
    place."""
    handle, partial = tempfile.mkstemp(dir=library.parent, prefix=f".{library.stem}.", suffix=".partial")
    os.close(handle)
    try:
        subprocess.run(
            [cxx, *flags, "-o", partial, str(source)], check=True, capture_output=True, text=True, timeout=BUILD_TIMEOUT
        )
        os.chmod(partial, 0o755)  # mkstemp's 0600 would hide it from other users of a shared cache
        os.replace(partial, library)
    except subprocess.CalledProcessError as exc:
        message = (exc.stderr or str(exc)).strip()[:500]
        raise UnsupportedError(f"{cxx} could not build {source.name}: {message}") from exc
    except subprocess.TimeoutExpired as exc:
        raise UnsupportedError(f"{cxx} was still building {source.name} after {BUILD_TIMEOUT:.0f} s") from exc
    except OSError as exc:
        raise UnsupportedError(f"{cxx} could not build {source.name}: {exc}") from exc
    finally:
        Path(partial).unlink(missing_ok=True)
