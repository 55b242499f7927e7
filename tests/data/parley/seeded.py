"""examples/parley/<ROLE>.py with one plausible bug written into parley-mqtt, for the tests
only (tests/live/test_parley.py): each bug is what a library's maintainer could write, and a
rule of bench/protocols/parley/rules.py must turn FALSE on the run it makes. The adapters and
the library shipped are untouched; this file patches the library in its own process.

    python tests/data/parley/seeded.py BUG ROLE
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any

from parley import commander as c
from parley import handler as h

bug, role = sys.argv[1], sys.argv[2]
sys.argv = [sys.argv[0]]


def forgets_running_commands() -> None:
    """H1: the dedup table consulted only for commands that have a result: a request for
    a running or queued id looks new, and runs again."""
    before = h.ParleyCommandHandler._on_request

    def on_request(self: Any, command_id: str, payload: object) -> None:
        held = self._commands.get(command_id)
        if held is not None and held.state in ("queued", "executing"):
            del self._commands[command_id]
        before(self, command_id, payload)
    h.ParleyCommandHandler._on_request = on_request   # type: ignore[method-assign]


def never_acknowledges() -> None:
    """C4: the rak left out."""
    c.ParleyCommander._publish_result_ack = lambda self, command_id: None  # type: ignore[method-assign]


def retries_after_life() -> None:
    """C2: the request's retry timer not stopped at the first sign of life (it fires once
    more)."""
    before = c.ParleyCommander._on_sign_of_life

    def on_sign_of_life(self: Any, cmd: Any) -> None:
        cmd.request_retry_timer = None     # forgotten, not cancelled
        before(self, cmd)
    c.ParleyCommander._on_sign_of_life = on_sign_of_life   # type: ignore[method-assign]


def heartbeats_once() -> None:
    """H3: the accept-ack heartbeat sent, the cadence never started."""
    before = h.ParleyCommandHandler._publish_heartbeat

    def publish_heartbeat(self: Any, cmd: Any) -> None:
        if cmd.cached_heartbeat_bytes is None:
            before(self, cmd)
            if cmd.heartbeat_timer is not None:
                cmd.heartbeat_timer.cancel()
                cmd.heartbeat_timer = None
    h.ParleyCommandHandler._publish_heartbeat = publish_heartbeat   # type: ignore[method-assign]


def heartbeats_past_the_result() -> None:
    """H3: the heartbeat timer let go at the first res, not cancelled: it fires once more,
    and that hb schedules the cadence again."""
    before = h.ParleyCommandHandler._complete_with_result

    def complete_with_result(self: Any, cmd: Any, result_bytes: bytes, was_executing: bool) -> None:
        cmd.heartbeat_timer = None     # forgotten, not cancelled
        before(self, cmd, result_bytes, was_executing)
    h.ParleyCommandHandler._complete_with_result = complete_with_result  # type: ignore[method-assign]


def deaf_to_cancels() -> None:
    """H7: a cnl for a running command dropped."""
    before = h.ParleyCommandHandler._on_cancel

    def on_cancel(self: Any, command_id: str) -> None:
        cmd = self._commands.get(command_id)
        if cmd is None or cmd.state != "executing":
            before(self, command_id)
    h.ParleyCommandHandler._on_cancel = on_cancel   # type: ignore[method-assign]


def resends_acknowledged_results() -> None:
    """H6: the rak ignored: results re-sent until the give-up window closes."""
    h.ParleyCommandHandler._on_result_ack = lambda self, command_id: None  # type: ignore[method-assign]


def one_slot_too_many() -> None:
    """H4: the cap compared with `<=`: one command more than max_concurrent_executions runs
    at once (handler.py's `_try_dispatch` as released, that one comparison changed)."""
    import asyncio

    def try_dispatch(self: Any) -> None:
        if self._dispatching:
            return
        self._dispatching = True
        try:
            while self._executing_count <= self._config.max_concurrent_executions \
                    and self._queue:
                cmd = self._queue.popleft()
                cmd.state = h._EXECUTING
                self._executing_count += 1
                task = asyncio.ensure_future(self._run_command(cmd))
                cmd.task = task
                self._tasks.add(task)
                task.add_done_callback(self._on_task_done)
        finally:
            self._dispatching = False
    h.ParleyCommandHandler._try_dispatch = try_dispatch   # type: ignore[method-assign]


BUGS = {f.__name__.replace("_", "-"): f for f in (
    forgets_running_commands, never_acknowledges, retries_after_life, heartbeats_once,
    heartbeats_past_the_result, deaf_to_cancels, resends_acknowledged_results, one_slot_too_many)}
BUGS[bug]()
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "parley"))
runpy.run_path(str(Path(__file__).resolve().parents[3] / "examples" / "parley" / f"{role}.py"),
               run_name="__main__")
