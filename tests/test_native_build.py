"""Building static int8's native kernels (``encoder/int8/build.py``): a cached library serves without a compiler,
processes building at once build once, a failed or timed-out build is remembered, the cache key names the compiler,
and ``sbert-qdrant build-kernels`` builds ahead of time."""

from __future__ import annotations

import os
import platform
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest
from child import Child

from sbert_qdrant.cli import main
from sbert_qdrant.encoder import cpu
from sbert_qdrant.encoder.int8 import build, native
from sbert_qdrant.errors import UnsupportedError
from sbert_qdrant.types import KERNEL_ISAS

REAL_COMPILER = build.compiler()
needs_compiler = pytest.mark.skipif(
    REAL_COMPILER is None or platform.machine().lower() not in ("x86_64", "amd64"),
    reason="building the kernels needs a C++ compiler on x86-64",
)


def fake_compiler(folder: Path, name: str, body: str, version: str = "fake c++ 1.0") -> str:
    """An executable standing in for a compiler: prints ``version`` for --version, else logs its call to
    ``<name>.calls`` and runs ``body`` (a shell snippet; "$@" are the compiler's arguments)."""
    script = folder / name
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi\n'
        f'echo "$$" >> "{folder / name}.calls"\n'
        f"{body}\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return str(script)


def calls(compiler: str) -> int:
    log = Path(f"{compiler}.calls")
    return len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0


def no_compiler_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CXX", str(tmp_path / "missing-c++"))


@needs_compiler
def test_a_cached_library_loads_without_a_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "kernels"
    isa = cpu.kernel_isa()[0] or "avx2"
    built = build.build_library(folder, isa=isa)
    no_compiler_on_path(monkeypatch, tmp_path)
    assert build.compiler() is None
    assert build.build_library(folder, isa=isa) == built
    if native.native_unsupported() is None:  # the CPU runs them: the library loads from the cache folder
        monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
        assert native.native_library() is not None


@needs_compiler
def test_a_folder_it_cannot_write_serves_a_library_another_compiler_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "kernels"
    built = build.build_library(folder)
    newer = fake_compiler(tmp_path, "newer-c++", "exit 1", version="c++ 99.0 (not the one that built it)")
    monkeypatch.setenv("CXX", newer)
    build.library_path(folder, newer).with_suffix(".lock").mkdir()  # the lock cannot be opened, even by root
    assert build.build_library(folder) == built
    assert calls(newer) == 0


@needs_compiler
def test_a_compiler_that_fails_falls_back_to_a_library_another_compiler_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "kernels"
    built = build.build_library(folder)
    broken = fake_compiler(tmp_path, "broken-c++", 'echo "int8.cpp:1: error: boom" >&2; exit 1')
    monkeypatch.setenv("CXX", broken)
    assert build.build_library(folder) == built  # its failure is remembered, the working library serves
    assert build.build_library(folder) == built
    assert calls(broken) == 1


def test_without_a_compiler_or_a_cached_library_the_build_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_compiler_on_path(monkeypatch, tmp_path)
    with pytest.raises(UnsupportedError, match=r"no C\+\+ compiler.*SBERT_QDRANT_NATIVE=off"):
        build.build_library(tmp_path / "kernels")


def test_a_failed_build_is_remembered_until_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = fake_compiler(tmp_path, "broken-c++", 'echo "int8.cpp:1: error: boom" >&2; exit 1')
    monkeypatch.setenv("CXX", broken)
    folder = tmp_path / "kernels"
    with pytest.raises(UnsupportedError, match="boom"):
        build.build_library(folder)
    with pytest.raises(UnsupportedError, match=r"earlier build.*boom.*build-kernels"):
        build.build_library(folder)  # another process, say: the marker answers, the compiler is not run again
    assert calls(broken) == 1
    assert len(list(folder.glob("*.failed"))) == 1
    with pytest.raises(UnsupportedError, match="boom"):
        build.build_library(folder, retry_failed=True)
    assert calls(broken) == 2
    assert not list(folder.glob("*.so")) and not list(folder.glob("*.partial"))


def test_a_build_past_its_time_limit_is_stopped_and_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = fake_compiler(tmp_path, "slow-c++", "exec sleep 30")
    monkeypatch.setenv("CXX", slow)
    monkeypatch.setattr(build, "BUILD_TIMEOUT", 0.5)
    with pytest.raises(UnsupportedError, match="still building"):
        build.build_library(tmp_path / "kernels")
    with pytest.raises(UnsupportedError, match="earlier build"):
        build.build_library(tmp_path / "kernels")
    assert calls(slow) == 1


def test_the_cache_key_names_isa_source_platform_and_compiler(tmp_path: Path) -> None:
    one = fake_compiler(tmp_path, "one", "exit 1", version="g++ (Debian 12.2.0) 12.2.0")
    other = fake_compiler(tmp_path, "other", "exit 1", version="clang version 17.0.0")
    first, second = build.library_path(tmp_path, one), build.library_path(tmp_path, other)
    assert first != second
    assert build.library_path(tmp_path, one, isa="avx2").name.startswith("int8-avx2-") and "avx512_vnni" in first.name
    machine = f"{platform.system()}-{platform.machine()}".lower()
    assert first.name.startswith("int8-") and machine in first.name and first.suffix == ".so"


@needs_compiler
def test_processes_building_at_once_build_once(tmp_path: Path) -> None:
    assert REAL_COMPILER is not None
    slow_real = fake_compiler(tmp_path, "slow-real-c++", f'sleep 1; exec "{REAL_COMPILER}" "$@"')
    folder = tmp_path / "kernels"
    code = "import sys; from pathlib import Path; from sbert_qdrant.encoder.int8 import build_library; "
    code += "print(build_library(Path(sys.argv[1])))"
    env = {"PATH": str(Path(REAL_COMPILER).parent), "CXX": slow_real}
    env |= {key: value for key, value in os.environ.items() if key in ("PYTHONPATH", "HOME")}
    with ExitStack() as running:  # bounded by progress, not by the clock (tests/child.py)
        children = [running.enter_context(Child([sys.executable, "-c", code, str(folder)], env=env)) for _ in range(3)]
        results = [child.finish() for child in children]
    assert all(result.returncode == 0 for result in results), [result.stderr for result in results]
    paths = {result.stdout.strip() for result in results}
    assert len(paths) == 1 and Path(paths.pop()).is_file()
    assert calls(slow_real) == 1
    assert len(list(folder.glob("*.so"))) == 1 and not list(folder.glob("*.partial"))


@needs_compiler
def test_build_kernels_prints_the_library_and_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    assert main(["build-kernels"]) == 0
    out, err = capsys.readouterr()
    libraries = [Path(line) for line in out.splitlines()]
    assert len(libraries) == len(KERNEL_ISAS)  # one per instruction set, whichever this CPU runs
    assert all(library.is_file() and library.parent == tmp_path / "kernels" for library in libraries)
    assert "CPU:" in err and "flags:" in err and "int8 kernels ready" in err
    no_compiler_on_path(monkeypatch, tmp_path)
    assert main(["build-kernels"]) == 0  # already built: no compiler needed
    assert capsys.readouterr().out == out


def test_build_kernels_without_a_compiler_fails_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    no_compiler_on_path(monkeypatch, tmp_path)
    assert main(["build-kernels"]) == 2
    assert "build-kernels: error:" in capsys.readouterr().err


def test_build_kernels_switched_off_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SBERT_QDRANT_CACHE", str(tmp_path))
    monkeypatch.setenv("SBERT_QDRANT_NATIVE", "off")
    assert main(["build-kernels"]) == 0
    assert "SBERT_QDRANT_NATIVE=off" in capsys.readouterr().err
    assert not (tmp_path / "kernels").exists()


def test_the_kernel_source_ships_with_the_package() -> None:
    package = Path(build.__file__).parents[2]
    pattern = (build.SOURCE.parent.relative_to(package) / "*.cpp").as_posix()  # encoder/int8/kernels/*.cpp
    assert all(source.is_file() for source, _ in build.KERNELS.values())
    assert f'"{pattern}"' in (package.parent / "pyproject.toml").read_text(encoding="utf-8")
