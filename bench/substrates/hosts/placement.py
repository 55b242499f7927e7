"""Where a `--mode hosts` run puts things: the broker on its host and each node process on
its own, every one started over SSH (`Ssh`); the links between them cut, slowed and made
lossy on the hosts themselves with iptables and tc netem (`HostLinks`), as an operator does.

Each host's clock is measured against the bench's before anything starts, and a node there
counts its run clock from the run's start read on that host's clock: one history orders
every host's events truthfully, within each host's bound (`host_clock`, recorded).

Nothing is left on a host: every rule and qdisc carries the run's mark and is journaled
before it acts; the end of the run — whatever ended it — removes every one of them and
every process the run started there; a run that finds marks of a run whose bench is gone
removes those too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import secrets
import shlex
import subprocess
import time
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core import events as ev
from bench.core.envelope import Json
from bench.faults.primitives import (
    BLOCKS,
    BOTH_WAYS,
    Done,
    FaultRef,
    Firing,
    Outcome,
    Refused,
)
from bench.spec.distribution import Distribution
from bench.spec.scenario import Mode
from bench.spec.topology import MqttVersion, NodeSpec
from bench.substrates import Options
from bench.substrates.hosts.inventory import Host, Inventory, load_inventory, sharing
from bench.substrates.hosts.ssh import COMMAND_S, Clock, HostError, Ssh, control_dir
from bench.substrates.live.brokers import Broker, BrokerError, mosquitto_conf, wait_listening
from bench.substrates.live.control import LaunchSpec
from bench.substrates.live.nodes import STOP_S, LiveNode, ProcessNode
from bench.substrates.live.placement import ClockSetter, Hookless, Links
from bench.substrates.log import RunLog

if TYPE_CHECKING:
    from bench.substrates.live.deployment import LiveDeployment

#: the mark on every iptables rule a run adds (a comment) and the handle of its qdiscs
MARK = "a2a-bench"
QDISC = "a2a:"
#: the NFQUEUE numbers a run's delayers take (above those a host's own rules may use)
QUEUE_BASE = 47000
#: what every process a run starts on a host has in its environment: the run's token
RUN_ENV = "A2A_BENCH_RUN"
#: how long a killed process's ssh may take to end once its remote process is dead
ENDED_S = 10.0


def _mark(pid: int, token: str) -> str:
    return f"{MARK}-{pid}-{token}"


class HostBroker(Broker):
    """Mosquitto or amqtt on its host, listening on the host's address, started over SSH
    under the guard (it ends if the bench's connection does); its log comes back here."""

    def __init__(self, kind: str, ssh: Ssh, port: int, remote: str, workdir: Path,
                 python: str, code: str, token: str) -> None:
        super().__init__(kind, ssh.host.address, port, workdir)
        self.ssh, self.remote, self.python, self.code = ssh, remote, python, code
        self.token = token
        self.pid: int | None = None

    def _remote_command(self) -> str:
        q = shlex.quote
        guard = (f"cd {q(self.code)} && exec env {RUN_ENV}={self.token} "
                 f"PYTHONPATH={q(self.code)} {q(self.python)} -m bench.substrates.hosts.guard")
        if self.kind == "amqtt":
            return (f"{guard} {q(self.python)} -m bench.substrates.live.amqtt_server "
                    f"{self.port} {q(self.host)}")
        return f"{guard} $(command -v mosquitto || echo /usr/sbin/mosquitto) -c " \
               f"{q(self.remote)}/mosquitto.conf"

    def start(self, timeout_s: float | None = None, *, on_second: bool = False,
              version: MqttVersion | None = None) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.kind == "mosquitto":
            # its configuration written here, for its paths on the host, and put there —
            # at every start: a restart that forgets (persistence off) is told so
            local = mosquitto_conf(self.workdir, self.host, self.port, self.persistence,
                                   user=self.ssh.inventory.user)
            text = local.read_text().replace(str(self.workdir), self.remote)
            self.ssh.run(f"mkdir -p {shlex.quote(self.remote)}/mosquitto-data")
            self.ssh.put(f"{self.remote}/mosquitto.conf", text.encode())
        self.starts += 1
        log = self.workdir / f"{self.kind}.log"

        def launch() -> None:
            with open(log, "ab") as fh:
                self.proc = subprocess.Popen(self.ssh.argv(self._remote_command()),
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=fh, start_new_session=True)
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline()
            if not line.strip().isdigit():
                self.proc.wait(timeout=ENDED_S)
                raise BrokerError(f"{self.kind} on {self.ssh.host.name} did not start: "
                                  f"{log.read_text()[-300:]}")
            self.pid = int(line)
            # (not `wait_listening`'s own check of the process: the socket is the host's,
            # never held by the ssh here)
            deadline = time.monotonic() + (timeout_s or 15.0)
            while True:
                try:
                    wait_listening(self.host, self.port, 0.5, None, None)
                    return
                except BrokerError:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise BrokerError(f"{self.kind} on {self.ssh.host.name} is not "
                                          f"listening on {self.host}:{self.port}: "
                                          f"{log.read_text()[-300:]}") from None
        self.launch_in_phase(launch, on_second)

    def _signal(self, sig: str, wait_s: float) -> bool:
        """Send `sig` to the broker on its host; whether its guard ended within `wait_s`."""
        if self.proc is None or self.pid is None:
            return True
        self.ssh.run(f"kill -{sig} {self.pid}", check=False)
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self) -> None:
        if not self._signal("KILL", ENDED_S) and self.proc is not None:
            self.proc.kill()
        self.proc, self.pid = None, None

    def stop(self) -> None:
        if not self._signal("TERM", 3.0):
            self.kill()
        self.proc, self.pid = None, None


class SshLauncher:
    """A node process on its host: the node-process protocol over SSH's stdin and stdout,
    as a pipe carries it for `--nodes process`; killed and frozen by signals sent there."""

    freezer = "SIGSTOP on its host"

    def __init__(self, ssh: Ssh, python: str, code: str, data_dir: str,
                 started: set[tuple[str, int]], token: str) -> None:
        self.ssh, self.python, self.code, self.data_dir = ssh, python, code, data_dir
        self.token = token
        self.pids: dict[int, int] = {}       # local ssh pid -> the node's pid on the host
        self.started = started               # every (host, pid) the run started

    async def spawn(self) -> asyncio.subprocess.Process:
        q = shlex.quote
        proc = await self.ssh.spawn(
            f"mkdir -p {q(self.data_dir)} && cd {q(self.code)} && echo $$ && exec env "
            f"{RUN_ENV}={self.token} PYTHONPATH={q(self.code)} PYTHONUNBUFFERED=1 "
            f"{q(self.python)} -m "
            "bench.substrates.live.node_process")
        assert proc.stdout is not None
        line = await proc.stdout.readline()
        if line.strip().isdigit():
            self.pids[proc.pid] = int(line)
            self.started.add((self.ssh.host.name, int(line)))
        return proc      # (no pid: the process ended at once, and ProcessNode says so)

    async def _signal(self, proc: asyncio.subprocess.Process, sig: str) -> None:
        pid = self.pids.get(proc.pid)
        if pid is not None:
            await self.ssh.arun(f"kill -{sig} {pid}", check=False)

    async def freeze(self, proc: asyncio.subprocess.Process, on: bool) -> None:
        await self._signal(proc, "STOP" if on else "CONT")

    async def _ended(self, proc: asyncio.subprocess.Process, within_s: float) -> bool:
        try:
            await asyncio.wait_for(proc.wait(), within_s)
        except TimeoutError:
            return False
        return True

    async def kill(self, proc: asyncio.subprocess.Process) -> str:
        await self._signal(proc, "KILL")
        if not await self._ended(proc, ENDED_S):
            proc.kill()
            await proc.wait()
            return f"SIGKILL on {self.ssh.host.name}; its ssh still open after {ENDED_S:g} s"
        return f"SIGKILL on {self.ssh.host.name}"

    async def terminate(self, proc: asyncio.subprocess.Process) -> str:
        await self._signal(proc, "TERM")
        if not await self._ended(proc, STOP_S):
            await self._signal(proc, "KILL")
            await self._ended(proc, ENDED_S)
            return f"SIGTERM on {self.ssh.host.name}, then SIGKILL: still running after " \
                   f"{STOP_S:g} s"
        return f"SIGTERM on {self.ssh.host.name}"


class HostLinks(Links):
    """Link faults on the hosts themselves: a partition is iptables DROP rules between a
    node's host and the broker's address, both ways or one (a blackhole: nothing is
    closed), latency
    and loss a netem qdisc on each side's interface for that peer only. Every change is
    journaled (`journal.jsonl` in the run folder) before it is made."""

    def __init__(self, placement: HostsPlacement) -> None:
        self.p = placement
        self._rules: dict[tuple[int, str], list[tuple[Ssh, str]]] = {}   # fault, node -> undo
        #: fault, node -> each side's NFQUEUE rule and its delayer (latency without netem)
        self._held: dict[tuple[int, str], list[tuple[Ssh, str, asyncio.subprocess.Process]]] = {}
        self._queues = 0
        #: (host, interface) -> peer address -> its netem, as the qdisc there has it
        self.shaped: dict[tuple[str, str], dict[str, str]] = {}

    def _journal(self, entry: dict[str, Json]) -> None:
        with open(self.p.workdir / "hosts" / "journal.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    async def down(self, dep: LiveDeployment, fault: FaultRef, nodes: tuple[str, ...],
                   unplug: bool, direction: str = "both") -> Outcome:
        if unplug:
            return Refused("an unplugged cable on a host would cut the bench's SSH to it "
                           "too: --mode hosts partitions by iptables only (unplug = false)")
        return await self._drop(fault, nodes, "", BLOCKS[direction])

    async def up(self, dep: LiveDeployment, fault: FaultRef, nodes: tuple[str, ...]) -> Outcome:
        return await self._undrop(fault, nodes, "partitioned", "packetsBlackholed")

    async def loss(self, fault: FaultRef, nodes: tuple[str, ...], probability: float) -> Outcome:
        """Each packet between the node's host and the broker dropped with `probability`,
        both ways (iptables' statistic match): TCP retransmits it late."""
        if probability <= 0:
            return await self._undrop(fault, nodes, "lost under the fault", "count")
        return await self._drop(fault, nodes,
                                f"-m statistic --mode random --probability {probability:.6f} ")

    async def _drop(self, fault: FaultRef, nodes: tuple[str, ...], match: str,
                    ways: frozenset[str] = BOTH_WAYS) -> Outcome:
        """iptables DROP rules on each node's host for what goes to ("up") and comes from
        ("down") the broker's address (`match`: only some of it), journaled before they are
        added."""
        broker = self.p.broker_host.address
        for node in nodes:
            ssh = self.p.ssh[self.p.node_hosts[node].name]
            mark = f"{self.p.mark}-f{fault.index}-{node}"
            rules = [rule for way, rule in (
                ("up", f"OUTPUT -d {broker} {match}-m comment --comment {mark} -j DROP"),
                ("down", f"INPUT -s {broker} {match}-m comment --comment {mark} -j DROP"))
                if way in ways]
            self._journal({"fault": fault.index, "node": node, "host": ssh.host.name,
                           "iptables": list[Json](rules)})
            self._rules[(fault.index, node)] = [(ssh, r) for r in rules]
            # one command for both (each costs a round trip and the host's shell start-up)
            await ssh.arun(" && ".join(ssh.root(f"iptables -w -I {r}") for r in rules))
        return Done()

    async def _undrop(self, fault: FaultRef, nodes: tuple[str, ...], action: str,
                      counted: str) -> Outcome:
        firings = []
        for node in nodes:
            rules = self._rules.pop((fault.index, node), [])
            dropped = 0
            if rules:
                ssh = rules[0][0]
                mark = rules[0][1].split("--comment ")[1].split()[0]
                # the rules' counters read and the rules deleted in one command
                listed = (await ssh.arun(" ; ".join(
                    [ssh.root("iptables -w -L OUTPUT -v -x -n"),
                     ssh.root("iptables -w -L INPUT -v -x -n"),
                     *(ssh.root(f"iptables -w -D {r}") for _, r in rules)]),
                    check=False)).stdout.decode(errors="replace")
                dropped = sum(int(line.split()[0]) for line in listed.splitlines()
                              if f"/* {mark} */" in line and line.split()[0].isdigit())
            self._journal({"fault": fault.index, "node": node, "healed": True})
            if rules and (dropped or action == "partitioned"):
                firings.append(Firing(action, node, {counted: dropped}))
        return Done(tuple(firings))

    async def latency(self, fault: FaultRef, nodes: tuple[str, ...],
                      latency_ms: Distribution | None) -> Outcome:
        for node in nodes:
            here, there = self.p.node_hosts[node], self.p.broker_host
            if here.name == there.name:
                return Refused(f"{node} runs on the broker's host ({here.name}): its link "
                               "to the broker crosses no interface to slow")
        if self.p.latency_by == "nfqueue":
            return await self.hold(fault, nodes, latency_ms)
        return await self.shape(fault, nodes, None if latency_ms is None
                                else f"delay {netem_delay(latency_ms)}")

    async def hold(self, fault: FaultRef, nodes: tuple[str, ...],
                   latency_ms: Distribution | None) -> Outcome:
        """Latency where the hosts' kernels have no netem: on each side, what arrives from
        the other is queued (iptables NFQUEUE, `--queue-bypass`) to a delayer there
        (`bench.substrates.hosts.delayer`) that lets each packet through when a delay drawn
        from `latency_ms` has passed — each packet's transit drawn, as the simulator's
        link draws it. Off: the rules deleted, the delayers told to stop (what they hold
        goes at once)."""
        firings = []
        for node in nodes:
            key = (fault.index, node)
            count = 0
            for ssh, rule, proc in self._held.pop(key, []):
                await ssh.arun(ssh.root(f"iptables -w -D {rule}"), check=False)
                if proc.stdin is not None:
                    proc.stdin.close()
                with contextlib.suppress(asyncio.TimeoutError, ValueError):
                    said = await asyncio.wait_for(proc.stdout.read(), ENDED_S) \
                        if proc.stdout is not None else b""
                    count += int(said.split()[-1]) if said.startswith(b"held ") else 0
                with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
                    await asyncio.wait_for(proc.wait(), ENDED_S)
            if count:
                firings.append(Firing("delayed under the fault", node, {"count": count}))
            if latency_ms is None:
                self._journal({"fault": fault.index, "node": node, "healed": True})
                continue
            here, there = self.p.node_hosts[node], self.p.broker_host
            mark = f"{self.p.mark}-f{fault.index}-{node}"
            held = []
            for host, peer in ((here, there.address), (there, here.address)):
                ssh = self.p.ssh[host.name]
                self._queues += 1
                queue = QUEUE_BASE + self._queues
                rule = (f"INPUT -s {peer} -m comment --comment {mark} -j NFQUEUE "
                        f"--queue-num {queue} --queue-bypass")
                self._journal({"fault": fault.index, "node": node, "host": host.name,
                               "iptables": [rule], "delayer": queue})
                q = shlex.quote
                proc = await ssh.spawn(ssh.root(
                    f"env {RUN_ENV}={self.p.token} PYTHONPATH={q(self.p.code[host.name])} "
                    f"{q(self.p.inventory.python_of(host))} -m bench.substrates.hosts.delayer "
                    f"{queue} {q(json.dumps(latency_ms.to_json()))} {fault.index}"))
                assert proc.stdout is not None
                ready = await asyncio.wait_for(proc.stdout.readline(), ENDED_S)
                if ready.strip() != b"ready":
                    err = b"" if proc.stderr is None else await proc.stderr.read()
                    raise HostError(f"{host.name}: the delayer did not start: "
                                    f"{(ready + err).decode(errors='replace').strip()[-300:]}")
                await ssh.arun(ssh.root(f"iptables -w -I {rule}"))
                held.append((ssh, rule, proc))
            self._held[(fault.index, node)] = held
        return Done(tuple(firings))

    async def shape(self, fault: FaultRef, nodes: tuple[str, ...], netem: str | None) -> Outcome:
        """netem `netem` (None: off) on the traffic between each node's host and the
        broker's, both ways: on each side's interface, a filter sends what goes to the peer
        into a band of its own with that netem."""
        firings = []
        for node in nodes:
            here, there = self.p.node_hosts[node], self.p.broker_host
            self._journal({"fault": fault.index, "node": node, "netem": netem,
                           "hosts": list[Json]([here.name, there.name])})
            count = 0
            for ssh, peer in ((self.p.ssh[here.name], there.address),
                              (self.p.ssh[there.name], here.address)):
                dev = await self._device(ssh, peer)
                peers = self.shaped.setdefault((ssh.host.name, dev), {})
                if netem is None:
                    if peers.get(peer) is not None:   # what its band sent, before it goes
                        band = 4 + sorted(set(peers.values())).index(peers[peer])
                        shown = (await ssh.arun(ssh.root(f"tc -s qdisc show dev {dev}"),
                                                check=False)).stdout.decode(errors="replace")
                        count += netem_sent(shown, f"{QDISC}{band:x}")
                    peers.pop(peer, None)
                else:
                    peers[peer] = netem
                await self._rebuild(ssh, dev, peers)
            if count:
                firings.append(Firing("delayed under the fault", node, {"count": count}))
        return Done(tuple(firings))

    async def _rebuild(self, ssh: Ssh, dev: str, peers: dict[str, str]) -> None:
        """The run's qdisc on `dev` made again for `peers` (none: removed): a prio root
        whose first three bands are the default's, and a netem band per distinct setting."""
        commands = [f"tc qdisc del dev {dev} root handle {QDISC} 2>/dev/null; true"]
        settings = sorted(set(peers.values()))
        if settings:
            commands.append(f"tc qdisc add dev {dev} root handle {QDISC} prio "
                            f"bands {3 + len(settings)}")
            for k, netem in enumerate(settings, start=4):
                commands.append(f"tc qdisc add dev {dev} parent {QDISC}{k:x} netem {netem}")
            for peer, netem in sorted(peers.items()):
                band = 4 + settings.index(netem)
                commands.append(f"tc filter add dev {dev} parent {QDISC} protocol ip prio 1 "
                                f"u32 match ip dst {peer}/32 flowid {QDISC}{band:x}")
        await ssh.arun(ssh.root("sh -c " + shlex.quote(" && ".join(commands))))

    async def _device(self, ssh: Ssh, peer: str) -> str:
        out = (await ssh.arun(f"ip -o route get {shlex.quote(peer)}")).stdout.decode()
        words = out.split()
        if "dev" not in words:
            raise HostError(f"{ssh.host.name}: no route to {peer}: {out.strip()}")
        return words[words.index("dev") + 1]


class HostClocks:
    """clock_skew on a host whose inventory names its `clock` command: the host's clock set
    off (every process there reads it), journaled before it acts, set back at the heal and
    at the run's end however it ends; a file on the host (`files/clock-<mark>-<host>`)
    says by how much it is off meanwhile, for the next run to set back if this one is
    killed outright."""

    def __init__(self, placement: HostsPlacement) -> None:
        self.p = placement
        self.off_ns: dict[str, int] = {}        # host -> how far the run has set it off
        self.inflight: dict[str, tuple[Future[Any], int]] = {}   # host -> (command, to)
        self._shifts = ThreadPoolExecutor(max_workers=1, thread_name_prefix="host-clock")

    def sets(self, node: str) -> bool:
        return self.p.node_hosts[node].clock is not None

    def _marker(self, host: str) -> str:
        return f"{self.p.inventory.files}/clock-{self.p.mark}-{host}"

    async def skew(self, fault: FaultRef, node: str, skew_ms: float) -> Outcome:
        host = self.p.node_hosts[node]
        want = round(skew_ms * 1_000_000)
        by = want - self.off_ns.get(host.name, 0)
        self.p.host_links._journal({"fault": fault.index, "node": node, "host": host.name,
                                    "clockNs": by, "offNs": want})
        ssh = self.p.ssh[host.name]
        marker = shlex.quote(self._marker(host.name))
        record = f"echo {want} > {marker}" if want else f"rm -f {marker}"
        # the marker first: a run killed between the two leaves a host its successor
        # sets back by the marker's amount (at worst, the amount it meant to set)
        job = self._shifts.submit(ssh.run, f"{record} && {shift_command(host, by)}")
        # kept until it has ended: a run interrupted while the command runs (its task
        # cancelled here, the command going on there) still learns at its end what it set
        self.inflight[host.name] = (job, want)
        await asyncio.wrap_future(job)
        del self.inflight[host.name]
        self.off_ns[host.name] = want
        return Done((Firing("host clock set" if want else "host clock set back", node,
                            {"host": host.name, "offMs": want / 1e6}),))

    def set_back(self) -> list[str]:
        """Every host the run left off set back (the run's end): what happened on each it
        had to, one line each (the command to do it by hand where it failed)."""
        said = []
        for name, (job, want) in list(self.inflight.items()):
            del self.inflight[name]
            try:
                job.result(timeout=COMMAND_S)
                self.off_ns[name] = want
            except CancelledError:          # never started
                pass
            except (HostError, TimeoutError) as exc:
                said.append(f"{name}: the command setting its clock {want / 1e9:+g} s off was "
                            f"interrupted ({exc}): whether it did is unknown; the host's "
                            f"marker {self._marker(name)} says what the next run sets back")
        self._shifts.shutdown(wait=False)
        for name, off in list(self.off_ns.items()):
            if not off:
                continue
            ssh, host = self.p.ssh[name], self.p.inventory.hosts[name]
            back = f"{shift_command(host, -off)} && rm -f {shlex.quote(self._marker(name))}"
            try:
                done = ssh.run(back, check=False)
                failed = done.returncode != 0 and done.stderr.decode(errors="replace")[-200:]
            except HostError as exc:
                failed = str(exc)
            self.off_ns[name] = 0
            said.append(f"{name}: its clock was still set off at the run's end: set back"
                        if not failed else
                        f"{name}: its clock is still set {off / 1e9:+g} s off and could not "
                        f"be set back ({failed.strip()}); on the host: {back}")
        return said


def shift_command(host: Host, ns: int) -> str:
    """The host's own command setting its clock `ns` nanoseconds off."""
    assert host.clock is not None
    return host.clock.replace("{ns}", str(ns))


class HostsPlacement(Hookless):
    """The broker on the inventory's broker host, each node on its host (the inventory's
    `place`, else round the hosts), links faulted on the hosts (`links`: no fault proxy,
    no hook of the proxies'); at the run's end, the hosts swept."""

    mode = Mode.HOSTS
    hosting = "hosts"
    #: how latency is put on the links: tc netem, or (kernels without it) an NFQUEUE held
    #: by a delayer on each receiving side
    latency_by = "netem"
    proxy_host = "127.0.0.1"      # (no proxies: links are the hosts' own)

    def __init__(self, options: Options, workdir: Path, nodes: list[str],
                 cut: dict[int, tuple[str, ...]] | None = None) -> None:
        if options.broker not in ("amqtt", "mosquitto"):
            raise BrokerError(f"--mode hosts runs its own broker on a host: --broker amqtt or "
                              f"mosquitto, not {options.broker!r}")
        assert options.hosts is not None
        self.workdir = workdir
        self.inventory: Inventory = load_inventory(Path(options.hosts))
        self.token = secrets.token_hex(3)
        self.mark = _mark(os.getpid(), self.token)
        self.remote = f"{self.inventory.files}/run-{self.token}"
        (workdir / "hosts").mkdir(parents=True, exist_ok=True)
        self._control = control_dir()
        self.ssh = {name: Ssh(self.inventory, h, self._control)
                    for name, h in self.inventory.hosts.items()}
        self.broker_host = self.inventory.hosts[self.inventory.broker]
        #: each link fault's nodes (by its index): placed apart from the rest
        self.cut = cut or {}
        self.node_hosts: dict[str, Host] = self.inventory.host_of(nodes, self.cut)
        self.started: set[tuple[str, int]] = set()
        self.host_links = HostLinks(self)
        self.links: Links | None = self.host_links
        self.host_clocks = HostClocks(self)
        self.set_clocks: ClockSetter | None = self.host_clocks
        self.clocks: dict[str, Clock] = {}
        self.code: dict[str, str] = {}
        try:
            self._prepare_hosts()
        except BaseException:
            self._close_connections()
            raise

    def _prepare_hosts(self) -> None:
        """Each host reached (its master connection up), swept of what dead runs left, the
        code uploaded, its clock measured — the hosts side by side."""
        from concurrent.futures import ThreadPoolExecutor

        def prepare(name: str) -> tuple[str, str, Clock]:
            ssh = self.ssh[name]
            try:
                self._sweep(ssh, dead_only=True)
                code = ssh.upload_code()
                return name, code, ssh.clock(self.inventory.python_of(ssh.host))
            except HostError as exc:
                raise BrokerError(f"{self.inventory.source}: {exc}") from None
        with ThreadPoolExecutor(max_workers=min(16, len(self.ssh))) as pool:
            for name, code, clock in pool.map(prepare, self.ssh):
                self.code[name], self.clocks[name] = code, clock

    def sharing(self) -> list[str]:
        """What the run's link faults cut besides the nodes they name, one line each."""
        return sharing(self.node_hosts, self.cut)

    def netem_refusal(self) -> str | None:
        """Why latency cannot be put on these hosts' links, or None. Each host is tried once
        with a netem qdisc on its loopback, removed at once; where a kernel has no netem,
        the latency is held in an NFQUEUE instead (`latency_by`), if every host's iptables
        can queue (a rule tried and deleted)."""
        missing = []
        for name, ssh in self.ssh.items():
            tried = ssh.run(ssh.root(f"tc qdisc add dev lo root handle {QDISC} netem delay "
                                     f"1ms && tc qdisc del dev lo root handle {QDISC}"),
                            check=False)
            if tried.returncode != 0:
                missing.append((name, ssh, tried.stderr.decode(errors="replace").strip()[-200:]))
        if not missing:
            return None
        probe = (f"INPUT -s 127.0.0.2 -p tcp -m comment --comment {self.mark}-probe -j NFQUEUE "
                 f"--queue-num {QUEUE_BASE} --queue-bypass")
        for name, ssh, said in missing:
            tried = ssh.run(ssh.root(f"iptables -w -I {probe} && iptables -w -D {probe}"),
                            check=False)
            if tried.returncode != 0:
                queue = tried.stderr.decode(errors="replace").strip()[-200:]
                return (f"{name} ({ssh.host.address}): tc cannot add a netem qdisc ({said}), "
                        f"and iptables cannot queue packets to hold them instead ({queue}): "
                        "its kernel lacks sch_netem (modprobe sch_netem) and NFQUEUE")
        self.latency_by = "nfqueue"
        return None

    def _sweep(self, ssh: Ssh, dead_only: bool) -> int:
        """Remove this run's marks from the host (`dead_only`: those of runs whose bench
        is gone): iptables rules, qdiscs, a clock left set off; returns how many."""
        listed = ssh.run(ssh.root("iptables -w -S"), check=False).stdout.decode(errors="replace")
        removed = 0
        for line in listed.splitlines():
            if f"--comment {MARK}-" not in line or not line.startswith("-A "):
                continue
            mark = line.split("--comment ")[1].split()[0]
            if _dead(mark) if dead_only else mark.startswith(self.mark):
                ssh.run(ssh.root(f"iptables -w -D {line[3:]}"), check=False)
                removed += 1
        if dead_only and ssh.host.clock is not None:   # a clock a killed run left set off
            files = shlex.quote(self.inventory.files)
            markers = ssh.run(f"cd {files} 2>/dev/null && grep -H . clock-{MARK}-*-"
                              f"{shlex.quote(ssh.host.name)} 2>/dev/null", check=False)
            for line in markers.stdout.decode(errors="replace").splitlines():
                marker, _, off = line.partition(":")
                mark = marker.removeprefix("clock-").removesuffix(f"-{ssh.host.name}")
                if _dead(mark) and off.strip().lstrip("-").isdigit():
                    back = (f"{shift_command(ssh.host, -int(off))} && rm -f "
                            f"{shlex.quote(f'{self.inventory.files}/{marker}')}")
                    if ssh.run(back, check=False).returncode != 0:
                        raise HostError(f"{ssh.host.name}: a run that is gone left its clock "
                                        f"{int(off) / 1e9:+g} s off, and it could not be set "
                                        f"back; on the host: {back}")
                    removed += 1
        if not dead_only:     # the interfaces this run shaped (another run may shape others)
            for host, dev in self.host_links.shaped:
                if host == ssh.host.name and ssh.run(ssh.root(
                        f"tc qdisc del dev {dev} root handle {QDISC}"), check=False) \
                        .returncode == 0:
                    removed += 1
        return removed

    # -- what a live deployment asks of a placement ------------------------------------------
    def broker(self, options: Options, workdir: Path) -> Broker:
        name = self.broker_host.name
        return HostBroker(options.broker, self.ssh[name], self.inventory.port,
                          f"{self.remote}/{name}/broker", workdir / "broker",
                          self.inventory.python_of(self.broker_host), self.code[name],
                          self.token)

    def node_broker(self, broker: Broker) -> tuple[str, int]:
        return broker.host, broker.port

    def startup_s(self, nodes: int) -> float:
        """A node process started over SSH: about as long as one here, plus the login's
        round trips (the master connection makes them milliseconds)."""
        return 1.0 + 0.05 * nodes

    def on_its_host(self, spec: LaunchSpec, log: RunLog) -> tuple[Host, LaunchSpec]:
        """The node's host, and its launch spec there: its data dir in the run's files on
        that host, its run clock started from the run's start read on that host's clock
        (every host's clock recorded once, before the first node)."""
        if not self._clocks_recorded:
            self._clocks_recorded = True
            for name, c in self.clocks.items():
                log.record("bench", ev.HostClock(name, self.inventory.hosts[name].address,
                                                 c.offset_ms, c.bound_ms, c.samples))
        host = self.node_hosts[spec.config.node_id]
        data = f"{self.remote}/{host.name}/data/{spec.config.node_id}"
        return host, replace(spec, data_dir=Path(data),
                             t0=spec.t0 + self.clocks[host.name].offset_ms / 1000)

    def node(self, spec: LaunchSpec, log: RunLog, given: NodeSpec) -> LiveNode:
        host, spec = self.on_its_host(spec, log)
        data = str(spec.data_dir)
        launcher = SshLauncher(self.ssh[host.name], self.inventory.python_of(host),
                               self.code[host.name], data, self.started, self.token)
        return ProcessNode(spec, log, launcher)

    _clocks_recorded = False

    def closed(self, dep: LiveDeployment, completely: bool) -> None:
        """Every mark of the run off every host, every process it started there ended, its
        files there removed; the master connections closed."""
        try:
            for line in self.host_clocks.set_back():
                dep.record("bench", ev.HarnessError(line))
            for name, ssh in self.ssh.items():
                pids = " ".join(str(pid) for host, pid in self.started if host == name)
                with contextlib.suppress(HostError):
                    if pids:     # (only a process of this run: a pid may have been reused)
                        ssh.run(f"for p in {pids}; do grep -qa {RUN_ENV}={self.token} "
                                f"/proc/$p/environ 2>/dev/null && kill -KILL $p; done; true",
                                check=False)
                    removed = self._sweep(ssh, dead_only=False)
                    if removed:
                        dep.record("bench", ev.HarnessError(
                            f"{name}: {removed} iptables rule(s) or qdisc(s) of the run were "
                            "still there at its end: removed"))
                    ssh.run(f"rm -rf {shlex.quote(self.remote)}", check=False)
        finally:
            self._close_connections()

    def _close_connections(self) -> None:
        for ssh in self.ssh.values():
            with contextlib.suppress(Exception):
                ssh.close()
        with contextlib.suppress(OSError):
            for f in self._control.iterdir():
                f.unlink()
            self._control.rmdir()

    def abandon(self) -> None:
        """The deployment could not be built."""
        self._close_connections()


def netem_sent(shown: str, parent: str) -> int:
    """Packets the netem qdisc under `parent` (e.g. "a2a:4") sent, from `tc -s qdisc show`
    (its line, then " Sent B bytes P pkt ..."); 0 if it is not there."""
    lines = shown.splitlines()
    for i, line in enumerate(lines[:-1]):
        words = line.split()
        if words[:2] == ["qdisc", "netem"] and "parent" in words \
                and words[words.index("parent") + 1] == parent:
            sent = lines[i + 1].split()
            if sent[:1] == ["Sent"] and len(sent) > 3 and sent[3].isdigit():
                return int(sent[3])
    return 0


def netem_delay(d: Distribution) -> str:
    """netem's words for a delay drawn from `d`: its mean, and its spread as netem's normal
    jitter (a lognormal's long tail is cut: netem's table distributions are symmetric)."""
    p = d.params
    if d.kind == "fixed":
        return f"{p[0]:g}ms"
    if d.kind == "uniform":
        return f"{(p[0] + p[1]) / 2:g}ms {(p[1] - p[0]) / 2:g}ms"
    if d.kind == "exponential":
        return f"{p[0]:g}ms {p[0]:g}ms distribution normal"
    mean = p[0] * math.exp(p[1] ** 2 / 2)                  # lognormal(median, sigma)
    sd = mean * math.sqrt(math.exp(p[1] ** 2) - 1)
    return f"{mean:.4g}ms {sd:.4g}ms distribution normal"


def _dead(mark: str) -> bool:
    """Whether the bench a mark names (a2a-bench-<pid>-<token>...) is gone — on this
    machine: the controller's pid."""
    try:
        pid = int(mark.split("-")[2])
    except (IndexError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False

