"""The benchmarks' line on what else ran: a process busy beside it is named, the
benchmark's own children are not."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.tools.machine import busy_elsewhere, note

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SPIN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"


def _pid_of_orphan() -> int:
    """A spinning process that is not ours: started by a shell that exits at once, so that
    it belongs to init (as a build left running in the background does)."""
    shell = subprocess.run(["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!',
                            SPIN], capture_output=True, text=True, check=True)
    return int(shell.stdout.strip())


def test_a_process_busy_beside_the_benchmark_is_named() -> None:
    pid = _pid_of_orphan()    # a process already: starting or spinning, it takes CPU
    try:
        got = busy_elsewhere(0.5)
        assert got is not None
        cores, used, _gone = got
        # on a loaded machine it gets less than a core, but some of one
        assert pid in {p for _n, p, _c in used} and cores > 0
        line = note("before", 0.5)
        assert line is not None and line.startswith("machine before: ")
    finally:
        subprocess.run(["kill", str(pid)], check=False)


def test_the_benchmarks_own_children_are_not_counted() -> None:
    child = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        got = busy_elsewhere(0.5)
        assert got is not None and child.pid not in {p for _n, p, _c in got[1]}
    finally:
        child.kill()
        child.wait()
