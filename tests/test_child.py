"""The progress-bounded subprocess runner the suite's subprocess tests use (tests/child.py)."""

from __future__ import annotations

import sys

import pytest
from child import Child, run_child

TICKS = "import sys, time\nfor i in range(8):\n    print(i, flush=True); time.sleep(0.25)\nsys.exit(3)"


def test_a_child_that_keeps_writing_may_outlast_the_idle_limit() -> None:
    result = run_child([sys.executable, "-c", TICKS], idle=1.5)  # runs 2 s, never silent for 1.5 s
    assert (result.returncode, result.stdout.split()) == (3, [str(i) for i in range(8)])
    echo = run_child([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], input="hi")
    assert echo.stdout == "HI\n" and echo.stderr == ""


def test_a_silent_child_is_killed_and_the_test_fails_saying_why() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"without output \(idle limit"):
        run_child([sys.executable, "-c", "print('started', flush=True); import time; time.sleep(60)"], idle=0.5)
    with pytest.raises(pytest.fail.Exception, match="total 1 s"):
        run_child([sys.executable, "-c", TICKS.replace("range(8)", "range(100)")], idle=30, total=1)


def test_waiting_for_a_line() -> None:
    with Child([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"]) as child:
        child.wait_for("ready")
    failing = Child([sys.executable, "-c", "import sys; sys.exit('boom')"])
    with failing, pytest.raises(pytest.fail.Exception, match=r"ended before printing 'ready'(.|\n)*boom"):
        failing.wait_for("ready")
