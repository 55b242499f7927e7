"""What else the machine was doing: a benchmark's figures are only the bench's where nothing
ran beside it.

A niced `cargo install` that `.ci/run` leaves compiling in the background took a tenth off
a matrix's speed-up on two cores (docs/findings/scale.md, 2026-12-07), and nothing in the
figures said so. `busy_elsewhere` samples the kernel's counters (`/proc/stat`, each
process's `/proc/PID/stat`) over a moment and names the busiest processes that are not this
one or its children; `note` is the line a benchmark prints before and after it measures.
Linux only: elsewhere there is nothing to read and nothing is printed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

#: below this many cores busy, the machine is idle enough (the kernel's own threads, a shell)
QUIET_CORES = 0.15


@dataclass(frozen=True)
class Snapshot:
    """Every process /proc listed at one moment: pid -> (its command's name, its parent's
    pid, its user + system clock ticks so far); `gone`: how many it listed that ended before
    their stat could be read (their time since the last snapshot is not counted)."""

    procs: dict[int, tuple[str, int, int]]
    gone: int


def _snapshot() -> Snapshot:
    procs: dict[int, tuple[str, int, int]] = {}
    gone = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            gone += 1
            continue
        # the name is in parentheses and may hold spaces: the fields follow the last ")"
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        procs[int(entry.name)] = (name, int(fields[1]), int(fields[11]) + int(fields[12]))
    return Snapshot(procs, gone)


def _ours(procs: dict[int, tuple[str, int, int]]) -> set[int]:
    """This process and every process below it."""
    ours = {os.getpid()}
    grew = True
    while grew:
        below = {pid for pid, (_n, parent, _t) in procs.items() if parent in ours} - ours
        grew = bool(below)
        ours |= below
    return ours


def busy_elsewhere(seconds: float = 1.0) -> tuple[float, list[tuple[str, int, float]], int] | None:
    """Cores busy over `seconds` in processes other than this one and its children, the
    busiest of them (name, pid, cores), most first, and how many processes ended while they
    were being read (not counted); None where /proc cannot be read."""
    if not Path("/proc/stat").exists():
        return None
    hz = os.sysconf("SC_CLK_TCK")
    before, t0 = _snapshot(), time.monotonic()
    time.sleep(seconds)
    after, elapsed = _snapshot(), time.monotonic() - t0
    ours = _ours(after.procs)
    used = [(name, pid, (ticks - before.procs[pid][2]) / hz / elapsed)
            for pid, (name, _parent, ticks) in after.procs.items()
            if pid in before.procs and pid not in ours and ticks > before.procs[pid][2]]
    used.sort(key=lambda u: -u[2])
    return sum(u[2] for u in used), used, before.gone + after.gone


def _command(pid: int, name: str, width: int = 48) -> str:
    """The process's command line, cut to `width` (its name where it has gone)."""
    try:
        words = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return name
    line = " ".join(Path(w.decode(errors="replace")).name if i == 0 else
                    w.decode(errors="replace") for i, w in enumerate(words) if w)
    return (line[:width - 1] + "…" if len(line) > width else line) or name


def note(when: str, seconds: float = 1.0) -> str | None:
    """One line on what else ran `when` (before, after), or None where nothing can be read."""
    got = busy_elsewhere(seconds)
    if got is None:
        return None
    cores, used, gone = got
    ended = f"; {gone} process{'es' if gone > 1 else ''} ended while read, not counted" \
        if gone else ""
    if cores < QUIET_CORES:
        return (f"machine {when}: idle ({cores:.2f} cores busy elsewhere over {seconds:g} s"
                f"{ended})")
    top = ", ".join(f"{_command(pid, name)} (pid {pid}) {c:.2f}" for name, pid, c in used[:3])
    return (f"machine {when}: NOT idle, {cores:.2f} cores busy elsewhere over {seconds:g} s "
            f"({top}{ended}): figures measured beside it are not the bench's alone")
