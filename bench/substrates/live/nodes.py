"""A live deployment's nodes: on its event loop (`InprocNode`), or a node process each
(`ProcessNode`) started by a `Launcher` — here (`LocalProcess`) or in a container (the
docker substrate's). Also how the deployment sees a node is up (its ExecutorsRegistered).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from bench.core import events as ev
from bench.core.events import from_fields
from bench.substrates.live.agents import BenchAgents
from bench.substrates.live.control import LaunchSpec, apply_op
from bench.substrates.live.host import Clock, LiveHost
from bench.substrates.log import RunLog

#: How long a node process may take to stop once told to (a "stop" line, SIGTERM) before it
#: is killed: its goodbye waits up to 2 s for the broker's acknowledgement.
STOP_S = 10.0


async def relay_stderr(stream: asyncio.StreamReader, node_id: str,
                       out: Callable[[str], None]) -> None:
    """What a node process writes on stderr (a warning, its traceback), line by line, each
    whole line handed to `out` with the node's name: node processes write side by side,
    and passed straight through, a line of one was cut by another's and could not be told
    apart."""
    while line := await stream.readline():
        out(f"  [{node_id}] {line.decode(errors='replace').rstrip()}")


def _to_stderr(text: str) -> None:
    """One line on the bench's stderr; on a terminal it first clears the progress line."""
    sys.stderr.write(("\r\033[K" if sys.stderr.isatty() else "") + text + "\n")
    sys.stderr.flush()


def stderr_sink(log: Path, echo: bool) -> Callable[[str], None]:
    """Where a node process's stderr lines go: always to `log` in the run folder (its
    warnings and tracebacks are the node's, kept with the run), and to the bench's stderr
    too unless the caller prints something else there (conform's table)."""
    def out(text: str) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(text.split("] ", 1)[-1] + "\n")     # the file names the node
        if echo:
            _to_stderr(text)
    return out


class LiveNode(Protocol):
    node_id: str
    spec: LaunchSpec

    @property
    def up(self) -> bool: ...

    async def prepare(self) -> None:
        """Whatever `start` can do ahead (a process or container loaded, waiting for its
        launch spec), so that the start itself is quick."""
        ...
    async def start(self) -> None: ...
    async def crash(self, graceful: bool = False) -> str:
        """Kill it (SIGKILL), or stop it as an operator does (SIGTERM); says how."""
        ...
    async def stop(self) -> None: ...
    def send(self, op: dict[str, Any]) -> bool: ...

    async def freeze(self, on: bool) -> str | None:
        """Freeze (on) or thaw the node's process; a reason if this hosting cannot."""
        ...

    @property
    def freezer(self) -> str:
        """How it freezes (journaled with the fault)."""
        ...


class InprocNode:
    """A node on the deployment's event loop; a crash discards the node object and the next
    start rebuilds it from the files in its data dir."""

    def __init__(self, spec: LaunchSpec, log: RunLog) -> None:
        self.node_id = spec.config.node_id
        self.spec = spec
        self.log = log
        self.host: LiveHost | None = None

    @property
    def up(self) -> bool:
        return self.host is not None

    async def prepare(self) -> None:
        pass

    async def start(self) -> None:
        self.host = self.spec.host(lambda node, event, t_ms: self.log.record(node, event, t_ms),
                                   Clock(self.spec.t0))
        self.host.boot()

    async def crash(self, graceful: bool = False) -> str:
        if self.host is not None:
            if graceful:
                await self.host.stop()
            else:
                self.host.crash()
        self.host = None
        return "stopped gracefully (told, then DISCONNECT)" if graceful \
            else "node object discarded"

    async def stop(self) -> None:
        if self.host is not None:
            await self.host.stop()
        self.host = None

    freezer = "-"

    async def freeze(self, on: bool) -> str | None:
        return ("an inproc node shares the bench's process and event loop: freezing it "
                "would freeze the run; pause needs --nodes process (or --mode docker)")

    def send(self, op: dict[str, Any]) -> bool:
        if self.host is None or self.host.node is None:
            return False
        apply_op(self.host, op)
        return True


class Launcher(Protocol):
    """How a node process is started, frozen and killed where it runs: a child process of
    the bench (`LocalProcess`), or a container (the docker substrate's). Whatever starts
    it, the process speaks the node-process protocol on its stdin and stdout."""

    #: how it freezes a node (journaled with the pause fault)
    freezer: str

    async def spawn(self) -> asyncio.subprocess.Process:
        """A new node process, its stdin, stdout and stderr piped, waiting for its launch
        spec."""

    async def freeze(self, proc: asyncio.subprocess.Process, on: bool) -> None: ...

    async def kill(self, proc: asyncio.subprocess.Process) -> str:
        """Kill it outright (the crash fault) and wait for it; says how."""

    async def terminate(self, proc: asyncio.subprocess.Process) -> str:
        """Ask it to stop (SIGTERM, as an operator or an orchestrator does), kill it if it
        has not ended within `STOP_S`, and wait for it; says how."""


#: A node command starting with one of these runs on the bench's own interpreter: the
#: adapters of examples/ import what its environment holds (paho, an SDK), and a bench run
#: as `.venv/bin/a2a-bench` with no venv active would otherwise start them on whichever
#: Python the PATH has first, or on none (Debian has no `python`)
OWN_PYTHON = frozenset({"python", "python3"})


def own_python(command: tuple[str, ...]) -> tuple[str, ...]:
    """`command`, its `python` or `python3` the bench's own interpreter."""
    return (sys.executable, *command[1:]) if command and command[0] in OWN_PYTHON else command


class LocalProcess:
    """A node process on this machine: the reference node process, or anyone's `command`."""

    freezer = "SIGSTOP"

    def __init__(self, command: tuple[str, ...] = ()) -> None:
        self.command = own_python(command) or (sys.executable, "-m",
                                               "bench.substrates.live.node_process")

    async def spawn(self) -> asyncio.subprocess.Process:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # a session of its own: a Ctrl-C at the terminal goes to the bench, which stops its
        # nodes itself, and never kills a node it would then journal as a crash of the node
        return await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True)

    async def freeze(self, proc: asyncio.subprocess.Process, on: bool) -> None:
        """SIGSTOP / SIGCONT: the process keeps its sockets and does nothing."""
        os.kill(proc.pid, signal.SIGSTOP if on else signal.SIGCONT)

    async def kill(self, proc: asyncio.subprocess.Process) -> str:
        proc.kill()   # SIGKILL
        await proc.wait()
        return "SIGKILL"

    async def terminate(self, proc: asyncio.subprocess.Process) -> str:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), STOP_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return f"SIGTERM, then SIGKILL: still running after {STOP_S:g} s"
        return "SIGTERM"


class ProcessNode:
    """A node in its own OS process (`python -m bench.substrates.live.node_process`, or the
    node's own `command`: anyone's node speaking the node-process protocol); a crash is
    SIGKILL, and the next start is a new process on the same data dir. A process that
    ends when the bench did not end it crashed: that is journaled (`node_crashed` with its
    exit status), never lost.

    The next process is started as soon as the old one is dead and waits, its Python and
    modules loaded, for its launch spec: a restart then costs a node's boot, as in the
    simulator and inproc, not a Python start-up too (0.2-0.5 s more down time, which
    showed as extra UNDELIVERABLE requests on the restart scenarios)."""

    def __init__(self, spec: LaunchSpec, log: RunLog, launcher: Launcher) -> None:
        self.node_id = spec.config.node_id
        self.spec = spec
        self.log = log
        self.launcher = launcher
        self.agents = BenchAgents(self) if spec.agents_by == "bench" else None
        self.proc: asyncio.subprocess.Process | None = None
        self._standby: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        #: the line read and not yet recorded: an interruption that lands in the reader
        #: between the two leaves it here, and the reader after it records it first
        self._in_hand: bytes | None = None
        self._ending = False     # the bench is ending this process (a crash fault, a stop)
        self._relays: set[asyncio.Task[None]] = set()   # each process's stderr, relayed
        #: where those lines go (the deployment points it at the run folder's logs/)
        self.stderr_out: Callable[[str], None] = _to_stderr

    async def _spawn(self) -> asyncio.subprocess.Process:
        proc = await self.launcher.spawn()
        if proc.stderr is not None:
            relay = asyncio.create_task(relay_stderr(proc.stderr, self.node_id,
                                                     self.stderr_out))
            self._relays.add(relay)
            relay.add_done_callback(self._relays.discard)
        return proc

    @property
    def up(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def _drop_standby(self) -> None:
        standby, self._standby = self._standby, None
        if standby is not None and standby.returncode is None:
            standby.kill()
            await standby.wait()

    async def prepare(self) -> None:
        if self._standby is None:
            self._standby = await self._spawn()

    async def start(self) -> None:
        standby, self._standby = self._standby, None
        self.proc = standby if standby is not None and standby.returncode is None \
            else await self._spawn()
        self._ending = False
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(self.spec.to_json()) + "\n").encode())
        await self.proc.stdin.drain()
        self._reader = asyncio.create_task(self._read(self.proc))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while True:
            line = self._in_hand or await proc.stdout.readline()
            self._in_hand = line
            if not line:
                code = await proc.wait()
                if not self._ending:
                    self.log.record(self.node_id, ev.NodeCrashed(
                        None, f"its process ended by itself (exit status {code})", None,
                        f"exit status {code}"))
                return
            try:   # the node-process protocol: one event per line, checked against the schema
                e = json.loads(line)
                event = from_fields(e["kind"], e["fields"])
                node, t_ms = str(e["node"]), float(e["tMs"])
            except (ValueError, KeyError, TypeError) as exc:
                self._in_hand = None
                self.log.record(self.node_id, ev.HarnessError(
                    "unparsable output line",
                    {"why": str(exc)[:200], "line": line[:200].decode(errors="replace")}))
                continue
            # let go of it as it is recorded (the recorder appends it first): an interruption
            # landing in between loses it, one landing after it cannot record it twice
            self._in_hand = None
            self.log.record(node, event, t_ms)
            if self.agents is not None and node == self.node_id:
                self.agents.saw(event)

    async def crash(self, graceful: bool = False) -> str:
        self._ending = True
        if self.agents is not None:
            self.agents.forget()
        how = "already ended"
        if self.proc is not None and self.proc.returncode is None:
            how = await (self.launcher.terminate if graceful else self.launcher.kill)(self.proc)
        await self._read_to_the_end()
        self.proc = None
        if self._standby is None:
            self._standby = await self._spawn()   # loads while the node is down
        return how

    async def stop(self) -> None:
        self._ending = True
        await self._drop_standby()
        if self.proc is None:
            return
        if self.proc.returncode is None and self.proc.stdin is not None:
            self._keep_reading()
            self.send({"op": "stop"})
            try:
                await asyncio.wait_for(self.proc.wait(), STOP_S)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        await self._read_to_the_end()
        self.proc = None
        if self._relays:     # its processes ended: their last stderr lines, then EOF
            await asyncio.wait(set(self._relays), timeout=2.0)

    def _keep_reading(self) -> None:
        """A Ctrl-C or SIGTERM is raised in whatever Python code runs when it lands, and
        may land in this node's reader task: that task then holds the interruption, and
        awaiting it raised it again in the clean-up (the nodes after it were left running
        past the bench's exit). The run was already told; reading goes on, from the line
        the interruption left in hand (lost, it made a stream's frames carry text its flow
        never emitted: a relay_integrity FALSE on an interrupted run, CI 2026-12-07)."""
        if self._reader is not None and self._reader.done() and not self._reader.cancelled() \
                and isinstance(self._reader.exception(), KeyboardInterrupt) \
                and self.proc is not None:
            self._reader = asyncio.create_task(self._read(self.proc))

    async def _read_to_the_end(self) -> None:
        self._keep_reading()
        if self._reader is not None:
            await self._reader

    @property
    def freezer(self) -> str:
        return self.launcher.freezer

    async def freeze(self, on: bool) -> str | None:
        """Alive, its sockets open, doing nothing (as its launcher freezes it)."""
        if self.proc is None or self.proc.returncode is not None:
            return f"{self.node_id} is down"
        await self.launcher.freeze(self.proc, on)
        return None

    def send(self, op: dict[str, Any]) -> bool:
        if self.proc is None or self.proc.returncode is not None or self.proc.stdin is None:
            return False
        self.proc.stdin.write((json.dumps(op) + "\n").encode())
        return True


def registered(node_id: str) -> Callable[[str, ev.Event], bool]:
    """Matches the event that says `node_id` registered its executors (it is up)."""
    return lambda node, event: node == node_id and isinstance(event, ev.ExecutorsRegistered)
