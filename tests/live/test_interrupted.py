"""A live run stopped from outside — Ctrl-C in its terminal, SIGTERM from a supervisor —
says so in one line, stops its node processes, and leaves a folder `check` judges."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from bench.cli import main
from bench.history import Recorder
from bench.run import Interrupted
from bench.substrates.live.control import LaunchSpec
from bench.substrates.live.deployment import complete
from bench.substrates.live.nodes import ProcessNode
from bench.substrates.log import RunLog
from tests.live.conftest import unexplained_by_amqtt_resume

#: How long the nodes may take to come up and send a first request on a loaded machine.
UP_WITHIN_S = 60.0


#: `python -m bench`, SIGINT to Python's own handler whatever the parent left it as
AS_A_TERMINAL_GIVES_IT = ("import runpy, signal, sys\n"
                          "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
                          "sys.argv[0] = 'a2a-bench'\n"
                          "runpy.run_module('bench', run_name='__main__')\n")


def _start(out: Path, scenario: str = "quickstart",
           how: tuple[str, ...] = ("--nodes", "process")) -> subprocess.Popen[str]:
    # its own process group, as a shell gives a foreground job: Ctrl-C reaches all of it.
    # And SIGINT handled, as a terminal's foreground job has it: a suite started in the
    # background of a script (`.ci/run &`) hands its children SIGINT ignored, Python keeps
    # it so, and every Ctrl-C test saw its run go on to the end (2026-12-05)
    return subprocess.Popen([sys.executable, "-c", AS_A_TERMINAL_GIVES_IT, "run", scenario, *how,
                             "--no-plots", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


#: Where a Ctrl-C lands in scenarios/restart.toml: as the workload starts, while exec-1 is
#: down (its crash journaled), and after it came back (the fault healed), with requests
#: and answers in flight each time.
POINTS = {"workload": '"kind":"workload_started"', "down": '"kind":"node_crashed"',
          "healed": '"kind":"fault_healed"'}


def ctrl_c_at(out: Path, point: str, how: tuple[str, ...]) -> None:
    """Run restart.toml on a wall-clock substrate, press Ctrl-C once `point` is in its
    history, and hold the run to what an interruption promises: one line, exit 2, and no
    FALSE (nothing the deployment did while it stopped counts against a node or a broker;
    issue 50: a docker run's Ctrl-C made the reference FALSE)."""
    proc = _start(out, "restart", how)
    history = out / "history.jsonl"
    # four containers (or processes) up — the run's own self-check allows 45 s and more on
    # a busy machine — and the fault's time come (8 s in): the suite's other docker tests
    # share the engine, which starts about three containers a second (DOCKER.md), and one
    # case saw no container up within two minutes of a full suite on 10 workers
    deadline = time.monotonic() + 5 * UP_WITHIN_S
    while not (history.exists() and POINTS[point] in history.read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{point} not reached within {5 * UP_WITHIN_S} s (exit "
                        f"{proc.poll()}): {proc.communicate()}")
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("a2a-bench:")]
    assert len(lines) == 1 and lines[0].startswith("a2a-bench: interrupted (Ctrl-C)"), stderr
    verdicts = json.loads((out / "verdicts.json").read_text())["verdicts"]
    wrong = {v["name"]: (v["value"], v["counterexamples"][:2]) for v in verdicts
             if v["value"] == "false"}
    started = json.loads((out / "history.jsonl").open().readline())
    if wrong and started.get("broker") == "amqtt":
        # amqtt's own loss at the kill, long before the Ctrl-C (CI, 2026-12-06: a request
        # in flight to exec-1 when it was killed, never resent on its resumed session)
        wrong = unexplained_by_amqtt_resume(out, wrong)
    assert not wrong
    assert proc.returncode == 2, stderr[-2000:]


@pytest.mark.parametrize("point", list(POINTS))
@pytest.mark.parametrize("nodes", ["inproc", "process"])
def test_ctrl_c_anywhere_in_a_live_run_is_never_a_verdict(tmp_path: Path, nodes: str,
                                                         point: str) -> None:
    ctrl_c_at(tmp_path / "run", point, ("--mode", "live", "--nodes", nodes))


def _nodes(proc: subprocess.Popen[str]) -> list[int]:
    """The bench's node processes (its children running node_process)."""
    found = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "node_process"],
                           capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in found]


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    return alive


def _wait_for_requests(proc: subprocess.Popen[str], history: Path) -> None:
    """Waits until the run is under way: a request has been sent (so nodes are up)."""
    deadline = time.monotonic() + UP_WITHIN_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if history.exists() and '"request_sent"' in history.read_text():
            return
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"no request sent within {UP_WITHIN_S} s")


@pytest.mark.parametrize(("how", "sig", "pgroup"), [("Ctrl-C", signal.SIGINT, True),
                                                    ("SIGTERM", signal.SIGTERM, False)])
def test_an_interrupted_live_run_says_one_line_and_stays_judgeable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str, sig: int,
        pgroup: bool) -> None:
    out = tmp_path / "run"
    proc = _start(out)
    _wait_for_requests(proc, out / "history.jsonl")
    nodes = _nodes(proc)
    assert nodes
    if pgroup:
        os.killpg(proc.pid, sig)      # the terminal signals the whole foreground group
    else:
        proc.send_signal(sig)
    _stdout, stderr = proc.communicate(timeout=60)
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("a2a-bench:")]
    assert len(lines) == 1 and lines[0].startswith(f"a2a-bench: interrupted ({how}) at "), stderr
    # (what was FALSE, if anything: once, under a full suite beside a fast-lane loop, a
    # SIGTERM at 0.8 s gave "1 FALSE", and the run folder was gone before anyone looked)
    assert proc.returncode == 2, (lines, [
        (v["name"], v["counterexamples"][:2]) for v in json.loads(
            (out / "verdicts.json").read_text())["verdicts"] if v["value"] == "false"])
    assert json.loads((out / "summary.json").read_text())["interrupted"]["how"] == how
    assert not _alive(nodes), "a node process outlived the bench"
    capsys.readouterr()
    assert main(["check", str(out)]) in (1, 2)
    printed = capsys.readouterr().out
    assert f"interrupted ({how}) at" in printed and "judged on what it recorded" in printed


def test_ctrl_c_while_node_processes_start_blames_no_node(tmp_path: Path) -> None:
    """A Ctrl-C as the first node processes start, while they are still importing: the
    terminal signals the whole foreground group, but the nodes run in sessions of their
    own, so none dies of it (it used to: four KeyboardInterrupt tracebacks and robustness
    FALSE, "exec-2 ... ended by itself"). The bench stops them and says so in one line."""
    out = tmp_path / "run"
    proc = _start(out)
    deadline = time.monotonic() + UP_WITHIN_S
    while not _nodes(proc):      # waits for the first node process
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=60)
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("a2a-bench:")]
    assert len(lines) == 1 and lines[0].startswith("a2a-bench: interrupted"), stderr
    assert proc.returncode == 2, stderr
    verdicts = json.loads((out / "verdicts.json").read_text())["verdicts"]
    assert not [v for v in verdicts if v["value"] == "false"], verdicts


def test_a_killed_run_with_its_last_line_cut_is_judged_on_the_lines_it_completed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SIGKILL leaves no summary; the history may end mid-line."""
    out = tmp_path / "run"
    proc = _start(out)
    _wait_for_requests(proc, out / "history.jsonl")
    children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                              text=True).stdout.split()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    for pid in children:   # the broker runs in a session of its own: SIGKILL spares it
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    history = out / "history.jsonl"
    cut = '{"seq": 99999, "tMs": 1.0, "node": "exec-1", "kind": "task_st'
    with open(history, "a") as fh:
        fh.write(cut)
    assert not (out / "summary.json").exists()
    assert main(["check", str(out)]) in (1, 2)
    printed = capsys.readouterr().out
    assert "interrupted (killed: the history ends without run_finished, its last line cut " \
           f"after {len(cut)} bytes)" in printed, printed
    assert main(["report", str(out)]) == 0


class _Quiet:
    """A stand-in for a node process: it reads its launch spec, then ends on a stop line."""

    freezer = "SIGSTOP"

    async def spawn(self) -> asyncio.subprocess.Process:
        script = "import sys\nfor line in sys.stdin:\n    if 'stop' in line: break\n"
        return await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE)

    async def freeze(self, proc: asyncio.subprocess.Process, on: bool) -> None:
        raise AssertionError("not frozen here")

    async def kill(self, proc: asyncio.subprocess.Process) -> str:
        proc.kill()
        await proc.wait()
        return "SIGKILL"

    async def terminate(self, proc: asyncio.subprocess.Process) -> str:
        return await self.kill(proc)


def _interrupted_in_the_turn_its_future_was_done(loop: asyncio.AbstractEventLoop) -> None:
    """A Ctrl-C raised by a callback (a node's commit) in the turn of the loop in which the
    future the run waits for was done (its sleep): the stop run_until_complete had coming
    stays queued on the loop."""
    done = loop.create_future()
    loop.call_soon(done.set_result, None)
    loop.call_soon(_raise_keyboard_interrupt)
    with pytest.raises(KeyboardInterrupt):
        loop.run_until_complete(done)


def _raise_keyboard_interrupt() -> None:
    raise KeyboardInterrupt


def test_a_ctrl_c_in_the_loops_turn_leaves_no_stop_for_the_close() -> None:
    """The close that follows runs to its end (a clean clone's suite saw it end half done:
    "Event loop stopped before Future completed", a traceback and no verdict, in
    test_ctrl_c_anywhere_in_a_live_run_is_never_a_verdict)."""
    loop = asyncio.new_event_loop()
    try:
        _interrupted_in_the_turn_its_future_was_done(loop)
        closing = loop.create_task(asyncio.sleep(0.01, "closed"))
        with pytest.raises(RuntimeError, match="stopped before Future completed"):
            loop.run_until_complete(closing)     # as the close was run before
        assert complete(loop, closing) == "closed"
        _interrupted_in_the_turn_its_future_was_done(loop)
        assert complete(loop, asyncio.sleep(0.01, "closed")) == "closed"
    finally:
        loop.close()


def test_a_node_whose_reader_the_interruption_landed_in_is_still_stopped() -> None:
    """A SIGTERM is raised in whatever Python code runs when it lands; when that was a
    node's output reader, awaiting the reader raised it again in the clean-up, and the
    nodes after it outlived the bench (CI: two of four). The node is stopped all the same,
    and stopping it raises nothing."""
    spec = cast(LaunchSpec, SimpleNamespace(config=SimpleNamespace(node_id="exec-1"),
                                            agents_by="node", to_json=lambda: {}))
    node = ProcessNode(spec, RunLog(cast(Recorder, None), time.monotonic), _Quiet())
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(node.start())

        async def landed() -> None:
            raise Interrupted("SIGTERM")
        assert node._reader is not None
        node._reader.cancel()
        node._reader = loop.create_task(landed())
        with pytest.raises(Interrupted):   # as the signal does: out of the loop, once
            loop.run_until_complete(asyncio.sleep(1))
        proc = node.proc
        assert proc is not None
        try:
            loop.run_until_complete(node.stop())
        except KeyboardInterrupt:
            pytest.fail("stopping the node raised the interruption again")
        assert proc.returncode is not None and node.proc is None
    finally:
        loop.close()


class _Lines:
    """What a RunLog hands its recorder: (node, event) of each line, in order."""

    def __init__(self) -> None:
        self.got: list[tuple[str, object]] = []

    def append(self, _t: float, node: str, event: object) -> None:
        self.got.append((node, event))


def test_the_line_a_reader_had_in_hand_when_interrupted_is_still_recorded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM that lands in a node's reader after it read a line and before it recorded
    it: the reader after it records that line first (lost, a stream's frames carried text
    its flow never emitted — relay_integrity FALSE on an interrupted run, a clean clone's
    suite 2026-12-07)."""
    from bench.core import events as ev
    from bench.core.events import kind_of, to_fields
    from bench.substrates.live import nodes
    spec = cast(LaunchSpec, SimpleNamespace(config=SimpleNamespace(node_id="exec-1"),
                                            agents_by="node", to_json=lambda: {}))
    lines = _Lines()
    node = ProcessNode(spec, RunLog(cast(Recorder, lines), time.monotonic), _Quiet())
    node._ending = True
    sent = [ev.SubscriberAttached(subscriber_id=f"tab{i}", conversation_id="c") for i in range(3)]
    parse, calls = nodes.from_fields, []

    def landing(kind: str, fields: dict[str, object]) -> object:
        calls.append(kind)
        if len(calls) == 2:        # the second line's: read, not yet recorded
            raise Interrupted("SIGTERM")
        return parse(kind, fields)
    monkeypatch.setattr(nodes, "from_fields", landing)
    loop = asyncio.new_event_loop()
    try:
        stdout = asyncio.StreamReader(loop=loop)
        for e in sent:
            stdout.feed_data((json.dumps({"node": "exec-1", "tMs": 1.0, "kind": kind_of(e),
                                          "fields": to_fields(e)}) + "\n").encode())
        stdout.feed_eof()

        async def ended() -> int:
            return 0
        proc = cast(asyncio.subprocess.Process,
                    SimpleNamespace(stdout=stdout, wait=ended, returncode=0))
        node.proc = proc
        node._reader = loop.create_task(node._read(proc))
        with pytest.raises(Interrupted):
            loop.run_until_complete(node._reader)
        loop.run_until_complete(node._read_to_the_end())
    finally:
        loop.close()
    assert [e for _n, e in lines.got] == sent


def test_a_node_process_stderr_reaches_the_bench_whole_lines_each_named() -> None:
    """Node processes write their stderr side by side; passed straight through, one's line
    was cut by another's ('[A2A-MQTT] ' then someone else's text): each whole line is handed
    on once, with the node that wrote it, however the process split its writes."""
    import sys

    from bench.substrates.live.nodes import relay_stderr
    script = ("import sys, time\n"
              "sys.stderr.write('[A2A-MQTT] '); sys.stderr.flush(); time.sleep(0.3)\n"
              "sys.stderr.write('store ready\\nsecond line\\n'); sys.stderr.flush()\n")

    async def go() -> list[str]:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script,
                                                    stderr=asyncio.subprocess.PIPE)
        got: list[str] = []
        assert proc.stderr is not None
        await asyncio.wait_for(relay_stderr(proc.stderr, "exec-3", got.append), 30)
        await proc.wait()
        return got
    assert asyncio.run(go()) == ["  [exec-3] [A2A-MQTT] store ready", "  [exec-3] second line"]
