"""Ray started here (by ``connect()``, by ``ray.init()``, or by Ray Data on first use) ends with this process even when
it is killed (SIGKILL: no ``atexit``, no
``ray.shutdown``): Ray's GCS and raylet die with their parent, but the agents the raylet starts (dashboard and
runtime-env agents) were seen to outlive it. A small watcher process, in a session of its own, follows this
process's descendants and kills those still alive once this process is gone; every run of the package starts it
(``watch_here``) where Ray's processes are this process's own. Linux only (it reads ``/proc``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

#: Seconds between two looks at this process and its descendants.
_POLL_S = 1.0

Process = tuple[int, str]  # a pid and its start time (a pid alone may be reused)

#: The watchers started here, held so that they are not collected (and warned about) while they run.
_WATCHERS: list[subprocess.Popen[bytes]] = []


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of a running process, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[19]


def descendants(root: int) -> list[Process]:
    """Every process below ``root`` now, with its start time."""
    children: dict[int, list[Process]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children.setdefault(stat[0], []).append((int(entry), stat[1]))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def _alive(process: Process) -> bool:
    stat = _stat(process[0])
    return stat is not None and stat[1] == process[1]


def watch(parent: Process) -> None:
    """Follow ``parent``'s descendants until it is gone, then kill those still alive (the watcher's own work)."""
    known: dict[int, str] = {}
    while _alive(parent):
        known.update(descendants(parent[0]))
        known.pop(os.getpid(), None)
        time.sleep(_POLL_S)
    for process in known.items():
        if _alive(process):
            try:
                os.kill(process[0], signal.SIGKILL)
            except OSError:  # gone meanwhile, or not ours to end
                continue


def watch_here() -> None:
    """The watcher of this process, started once, where Ray runs below it (started here, however); nothing where
    this process joined a cluster (no Ray process of its own to end)."""
    if any(watcher.poll() is None for watcher in _WATCHERS) or not descendants(os.getpid()):
        return
    start_watcher()


def start_watcher() -> subprocess.Popen[bytes] | None:
    """The watcher of this process (None where there is no ``/proc``)."""
    me = _stat(os.getpid())
    if not sys.platform.startswith("linux") or me is None:
        return None
    watcher = subprocess.Popen(
        [sys.executable, "-I", __file__, str(os.getpid()), me[1]],  # the standard library only: up at once
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not ended with this process's group (Ctrl-C): it must outlive it
    )
    _WATCHERS.append(watcher)
    return watcher


if __name__ == "__main__":
    watch((int(sys.argv[1]), sys.argv[2]))
