"""The progress of a long write: a tqdm bar on a terminal; where none can be drawn (stderr a file, a pipe, a job's
log), one log line every few seconds instead, since a bar's carriage returns never end a line there and a log
follower would see nothing until the work ends."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

#: Seconds between two lines of a write's progress where no bar can be drawn (the first after as long).
LOG_EVERY_S = 5.0


def progress_bar(desc: str, unit: str, total: int | None, show: bool) -> tqdm | LoggedProgress:
    """What shows a write's progress: nothing unless ``show``; a tqdm bar where stderr is a terminal (or a notebook's
    widget); else ``LoggedProgress``, lines logged at INFO (or written to stderr where logging shows no INFO)."""
    terminal = getattr(sys.stderr, "isatty", lambda: False)()
    if not show or terminal or "ipykernel" in sys.modules:
        return tqdm(desc=desc, unit=unit, total=total, disable=not show)
    return LoggedProgress(desc, unit, total)


class LoggedProgress:
    """A progress bar's ``update`` and context, as log lines: ``Upserting: 120/1,000 documents (12%), 35.2/s, about
    25 s left`` every ``every`` seconds of work, and a last line at the end of work that logged any."""

    def __init__(
        self,
        desc: str,
        unit: str,
        total: int | None,
        every: float = LOG_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.desc, self.unit, self.total, self.every, self.clock = desc, unit, total, every, clock
        self.n = 0
        self.started = self.last = clock()
        self.lines = 0

    def __enter__(self) -> LoggedProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.lines:
            self._log(done=True)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.clock() - self.last >= self.every:
            self._log(done=False)

    def _log(self, done: bool) -> None:
        now = self.clock()
        self.last, self.lines = now, self.lines + 1
        elapsed = max(now - self.started, 1e-9)
        rate = self.n / elapsed
        units = self.unit if self.unit.endswith("s") else f"{self.unit}s"
        line = f"{self.desc}: {self.n:,} {units}" if self.total is None else f"{self.desc}: {self.n:,}/{self.total:,}"
        if self.total is not None:
            line += f" {units}" + (f" ({100 * self.n / self.total:.0f}%)" if self.total else "")
        line += f", {rate:.1f}/s"
        if done:
            line += f", done in {elapsed:.0f} s"
        elif self.total and rate > 0:
            line += f", about {(self.total - self.n) / rate:.0f} s left"
        if logger.isEnabledFor(logging.INFO) and logger.hasHandlers():
            logger.info(line)
        else:  # asked for (show_progress_bar=True) with no logging set up to show it: stderr, as a bar would be
            print(line, file=sys.stderr, flush=True)
