"""Run a subprocess bounded by its progress, not by a wall clock: every byte it writes (a line, a progress bar's
update) restarts the idle limit, which grows with the machine's load per core; a large overall limit only catches a
child that keeps writing but never ends. A busy machine makes a child slow, never a failure."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

import pytest

__all__ = ["Child", "run_child"]

IDLE_S = 600.0  # silence allowed at a load of one process per core: each child here writes far more often
TOTAL_S = 1800.0  # a true hang


def load_per_core() -> float:
    """How many runnable processes share each core (1.0 where the platform cannot tell)."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (AttributeError, OSError):  # Windows
        return 1.0


class Child:
    """A child process whose stdout and stderr are read as they come; ``with`` kills it if the test leaves early."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        input: str | None = None,
        idle: float = IDLE_S,
        total: float = TOTAL_S,
        **popen: Any,
    ) -> None:
        self.args, self.idle, self.total = list(args), idle, total
        self.process = subprocess.Popen(
            self.args,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **popen,
        )
        self.started = self.progressed = time.monotonic()
        self.changed = threading.Condition()
        self.out: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        assert self.process.stdout is not None and self.process.stderr is not None
        self.readers = [
            threading.Thread(target=self._read, args=(stream, name), daemon=True)
            for stream, name in ((self.process.stdout, "stdout"), (self.process.stderr, "stderr"))
        ]
        for reader in self.readers:
            reader.start()
        if input is not None:
            assert self.process.stdin is not None
            with self.process.stdin:
                self.process.stdin.write(input.encode())

    def _read(self, stream: IO[bytes], name: str) -> None:
        while chunk := os.read(stream.fileno(), 65536):
            with self.changed:
                self.out[name] += chunk
                self.progressed = time.monotonic()
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def text(self, name: str = "stdout") -> str:
        with self.changed:
            return self.out[name].decode(errors="replace")

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        with self.changed:
            while not done():
                now = time.monotonic()
                idle = self.idle * max(1.0, load_per_core())
                if now - self.progressed > idle or now - self.started > self.total:
                    silent, running = now - self.progressed, now - self.started
                    self.process.kill()
                    pytest.fail(
                        f"{what}: killed after {running:.0f} s, {silent:.0f} s without output (idle limit {idle:.0f} s,"
                        f" total {self.total:.0f} s): {self.args}\nstdout: {self.out['stdout'][-2000:]!r}\n"
                        f"stderr: {self.out['stderr'][-2000:]!r}"
                    )
                self.changed.wait(timeout=1.0)

    def wait_for(self, text: str, stream: str = "stdout") -> None:
        """Wait until the child has printed ``text`` on ``stream`` (stdout or stderr); fail if it ends first."""

        def seen() -> bool:
            if text.encode() in self.out[stream]:
                return True
            if not any(reader.is_alive() for reader in self.readers):
                pytest.fail(f"the child ended before printing {text!r}: {self.args}\n{self.text('stderr')[-3000:]}")
            return False

        self._wait(seen, f"waiting for {text!r}")

    def finish(self) -> subprocess.CompletedProcess[str]:
        """Wait for the child to end; its exit code and everything it wrote."""
        self._wait(lambda: not any(reader.is_alive() for reader in self.readers), "waiting for the child to end")
        code = self.process.wait()
        return subprocess.CompletedProcess(self.args, code, self.text("stdout"), self.text("stderr"))

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        for reader in self.readers:
            reader.join(timeout=10)


def run_child(args: Sequence[str], **options: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(args, capture_output=True, text=True)``, bounded by progress (see ``Child``)."""
    with Child(args, **options) as child:
        return child.finish()
