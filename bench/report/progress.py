"""What a run shows on a terminal while it runs (the way locust and pytest do): one status
line rewritten in place — time run of time planned, requests sent and settled, faults
acting — and a line of its own for each fault that starts or heals. Piped or redirected,
nothing: the run's summary is what a log wants.

It reads the history as it is recorded (a recorder observer), so it shows what happened,
not what was planned.
"""

from __future__ import annotations

import shutil
import time
from typing import TextIO

from bench.history import Line

#: The status line is redrawn at most this often.
REDRAW_S = 0.2


class Status:
    def __init__(self, stream: TextIO, clock_word: str) -> None:
        self.stream = stream
        self.clock_word = clock_word   # how the line names the run clock ("simulated", "run")
        self.sent = self.settled = self.completed = 0
        self.acting: dict[int, str] = {}          # fault index -> its kind, while it acts
        self.t_ms = self.end_ms = 0.0
        #: the workload's clock (every time shown counts from its start, as fault times do)
        self.origin_ms = 0.0
        self.duration_ms: float | None = None
        self._drawn = 0.0
        self._wall0 = time.monotonic()

    def observe(self, line: Line) -> None:
        match line.kind:
            case "workload_started":
                self.origin_ms = line.t_ms
                self.duration_ms = float(line.fields["durationMs"])
            case "request_sent":
                self.sent += 1
            case "request_settled":
                self.settled += 1
                self.completed += line.fields.get("outcome") == "COMPLETED"
            case "fault_start":
                kind, index = str(line.fields["fault"]), int(line.fields["faultIndex"])
                self.acting[index] = kind
                on = line.fields.get("params")
                node = f" on {on['node']}" if isinstance(on, dict) and "node" in on else ""
                self._say(f"{self._now(line):7.1f} s  fault {kind}[{index}] starts{node}")
            case "fault_healed":
                kind, index = str(line.fields["fault"]), int(line.fields["faultIndex"])
                self.acting.pop(index, None)
                self._say(f"{self._now(line):7.1f} s  fault {kind}[{index}] healed")
            case "broker_down" | "broker_up":
                self._say(f"{self._now(line):7.1f} s  {line.kind.replace('_', ' ')}")

    def tick(self, t_ms: float, end_ms: float) -> None:
        self.t_ms, self.end_ms = t_ms, end_ms
        now = time.monotonic()
        if now - self._drawn >= REDRAW_S:
            self._drawn = now
            self._draw()

    def close(self) -> None:
        self.stream.write("\r\033[K")
        self.stream.flush()

    def _line(self) -> str:
        clock = self.clock_word
        faults = ", ".join(f"{k}[{i}]" for i, k in sorted(self.acting.items())) or "none"
        planned = self.duration_ms if self.duration_ms is not None else self.end_ms
        where = (f"{self.t_ms / 1000:6.1f} / {planned / 1000:.1f} s" if self.t_ms <= planned
                 else f"{planned / 1000:.1f} s, draining {(self.t_ms - planned) / 1000:4.1f}"
                      f" / at most {(self.end_ms - planned) / 1000:.1f} s")
        return (f"  {clock} {where}"
                f" (wall {time.monotonic() - self._wall0:5.1f} s)  requests {self.sent} sent,"
                f" {self.settled} settled ({self.completed} completed)  faults acting: {faults}")

    def _draw(self) -> None:
        # one row: a line wider than the terminal would wrap, and only its last row is redrawn
        width = shutil.get_terminal_size((120, 24)).columns - 1
        self.stream.write("\r\033[K" + self._line()[:width])
        self.stream.flush()

    def _say(self, text: str) -> None:
        self.stream.write("\r\033[K  " + text + "\n")
        self._draw()

    def _now(self, line: Line) -> float:
        """The time a line it prints tells (s), which the progress line then shows too: it
        never says an earlier time than the line above it."""
        self.t_ms = max(self.t_ms, line.t_ms - self.origin_ms)
        return (line.t_ms - self.origin_ms) / 1000
