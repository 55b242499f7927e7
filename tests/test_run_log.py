"""The run log's tally, which tells a live drain when it may stop: targeted messages that
can no longer come keep it going no longer than `RunLog.only_lost_left` says. Pure: the
clock is a number the test moves."""

from __future__ import annotations

import pytest

from bench.core import events as ev
from bench.core.envelope import MessageType
from bench.core.vocabulary import OutboundState, RequestOutcome
from bench.history import Recorder
from bench.substrates.log import RunLog
from tests.helpers import dropped


def _log() -> tuple[RunLog, list[float]]:
    now = [0.0]
    log = RunLog(Recorder(), lambda: now[0])
    log.nodes = {"orch-1", "exec-1"}
    return log, now


def _published(log: RunLog, message_id: str, target: str) -> None:
    log.record("orch-1", ev.OutboundSettled(message_id, MessageType.TASK_REQUEST,
                                            OutboundState.PUBLISHED, "directory", "llm.tax",
                                            target, "r1", f"ooder/node/{target}/inbox"))


def test_a_message_lost_while_its_target_stays_connected_stops_holding_the_drain() -> None:
    log, now = _log()
    log.record("exec-1", ev.MqttConnected("exec-1", False, None, 5, None))
    now[0] = 1_000
    _published(log, "m1", "exec-1")
    assert not log.quiet
    assert not log.only_lost_left(now[0] - 5_000)      # just published: it may yet come
    now[0] = 6_000
    assert log.only_lost_left(now[0] - 5_000)          # connected throughout, nothing since


def test_a_target_not_connected_or_anything_recorded_since_keeps_the_drain_waiting() -> None:
    log, now = _log()
    log.record("exec-1", ev.MqttConnected("exec-1", False, None, 5, None))
    _published(log, "m1", "exec-1")
    now[0] = 3_000
    log.record("exec-1", ev.MqttDisconnected("exec-1", "keepalive timeout"))
    now[0] = 20_000
    assert not log.only_lost_left(now[0] - 5_000)      # a reconnect would bring it again
    log.record("exec-1", ev.MqttConnected("exec-1", True, None, 5, None))
    now[0] = 22_000
    assert not log.only_lost_left(now[0] - 5_000)      # connected again 2 s ago
    now[0] = 25_001
    assert log.only_lost_left(now[0] - 5_000)
    log.record("exec-1", ev.NodeCrashed(0, "SIGKILL", None))
    now[0] = 40_000
    assert not log.only_lost_left(now[0] - 5_000)      # its process is gone, not connected


def test_a_request_still_outstanding_is_waited_for_whatever_was_lost() -> None:
    log, now = _log()
    log.record("exec-1", ev.MqttConnected("exec-1", False, None, 5, None))
    log.record("orch-1", ev.RequestSent("r1", "m1", "fin.orchestrator", "llm.tax", "c1",
                                        1_000_004_000, 4_000))
    _published(log, "m1", "exec-1")
    now[0] = 60_000
    assert not log.only_lost_left(now[0] - 5_000)
    log.record("orch-1", ev.RequestSettled("r1", RequestOutcome.NO_RESPONSE, 4_000, None))
    now[0] = 70_000
    assert log.only_lost_left(now[0] - 5_000)


def test_a_stream_frame_held_at_its_home_keeps_the_drain_until_accepted_gapped_or_lost() -> None:
    """A frame its home admitted behind a hole waits out the reorder window (500 ms), longer
    than the drain's quiet 300 ms: a live MQTT 5 run on a loaded machine stopped first, and
    relay_integrity said UNKNOWN for five frames "in flight at end" (2026-12-05)."""
    def relayed(log: RunLog, seq: int) -> None:
        log.record("exec-1", ev.RelaySent("s1", seq, f"f{seq}", "c1", "orch-1"))

    log, now = _log()
    relayed(log, 1)
    relayed(log, 2)
    assert not log.quiet
    log.record("orch-1", ev.RelayAccepted("s1", 1, "one", "c1"))
    assert not log.quiet                                   # seq 2 still held
    log.record("orch-1", ev.RelayGap("s1", 2, 3, "reorder window"))
    assert log.quiet                                       # its home stopped waiting for it
    relayed(log, 4)
    log.record("orch-1", ev.RelayDuplicate("s1", 4, 3, "f4"))   # held already: still held
    assert not log.quiet
    log.record("orch-1", ev.NodeCrashed(None, "SIGKILL", None, "killed"))
    assert log.quiet                                       # what it held died with it
    relayed(log, 5)
    now[0] = 6_000                                         # lost on the way, nothing since
    assert log.only_lost_left(now[0] - 5_000)
    relayed(log, 6)
    log.record("orch-1", dropped("orch-1", "BAD_SIGNATURE", message_id="f6"))
    assert 6 not in {seq for _home, _stream, seq in log.frames}    # refused, not held


def test_progress_lines_go_to_the_stderr_of_the_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's progress line is written to sys.stderr as it is when the line is written: a
    stream bound when bench.run was imported (a pytest capture, closed since) killed runs
    embedded in the suite once a loaded machine made them last 2 s (2026-12-08)."""
    import io
    import sys

    import bench.run as r
    clock = [0.0]

    def tick() -> float:
        clock[0] += 3.0
        return clock[0]
    monkeypatch.setattr(r.time, "perf_counter", tick)
    show = r.print_progress()
    now = io.StringIO()
    monkeypatch.setattr(sys, "stderr", now)
    show(5_000.0, 10_000.0)
    assert "simulated     5.0 / 10.0 s" in now.getvalue()
