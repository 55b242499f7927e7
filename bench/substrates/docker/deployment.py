"""The docker substrate (`--mode docker`): the broker and every node in a container of its
own on a user network made for the run, faults done the way an operator's world does them.

It is the one live deployment with a placement of its own (`ContainerPlacement`): the
broker (`DockerBroker`), each node (a `ContainerLauncher` starts the same node process and
core as `--nodes process`, its launch spec on stdin and its history on stdout, its data dir
a bind mount at the same absolute path) and the fault proxies' listening side (the
network's gateway, which the containers reach). Everything else — the run loop, the
nemesis and its own clients, the broker watch, the history — is the live deployment's.

Everything the run creates carries the label `a2a-bench.run=<run id>` and the pid of the
bench that made it; the run removes it all at the end whatever happens, and a run removes
what dead runs left (the engine allows only about 30 user networks).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core import events as ev
from bench.core.envelope import Json
from bench.faults.primitives import FaultRef
from bench.spec.scenario import Mode
from bench.spec.topology import MqttVersion, NodeSpec
from bench.substrates import Options
from bench.substrates.docker.image import LABEL, PROJECT, ensure
from bench.substrates.live.brokers import (
    Broker,
    BrokerError,
    free_port,
    mosquitto_conf,
    wait_listening,
)
from bench.substrates.live.control import LaunchSpec
from bench.substrates.live.nodes import STOP_S, LiveNode, ProcessNode
from bench.substrates.live.placement import ClockSetter, Links
from bench.substrates.log import RunLog

if TYPE_CHECKING:
    from bench.substrates.live.deployment import LiveDeployment

BROKER_PORT = 1883       # inside the network
RUN = f"{LABEL}.run"     # label: the run id
PID = f"{LABEL}.pid"     # label: the bench process that made it
KEEP = f"{LABEL}.keep"   # label: left up on purpose (--keep): no later run removes it
#: How long a killed node's `docker start -ai` may take to pass on the last lines its node
#: wrote, and end by itself, before the bench kills it too (it ends within milliseconds
#: of the container's kill, measured beside eight test workers, 2026-12-05: a longer bound
#: costs nothing, a shorter one may cut the history).
ATTACH_DRAIN_S = 20.0
#: What a crash's `how` adds when the bench had to kill the attach stream.
CUT = "; its attach stream did not end within {:g} s of it (lines it held are lost)"


def engine() -> Any:
    """The Docker Engine DOCKER_HOST names (default: the local socket), or BrokerError."""
    import docker
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any way of not reaching it
        raise BrokerError(f"no Docker Engine answers ({type(exc).__name__}: {exc}); "
                          "--mode docker needs one (DOCKER_HOST, or the local socket)") from None
    return client


def _to_stderr(line: str) -> None:
    print(f"a2a-bench: {line}", file=sys.stderr)


def sweep(client: Any, run_id: str | None = None,
          say: Callable[[str], None] = _to_stderr) -> int:
    """Remove the containers and networks of `run_id`, or (None) of every run whose bench
    process is gone. Returns how many things were removed; what the engine would not
    remove is said (`say`), with the command that removes it by hand."""
    import docker
    n = 0

    def ours(labels: dict[str, str]) -> bool:
        if RUN not in labels:
            return False
        if run_id is not None:
            return labels[RUN] == run_id
        return KEEP not in labels and not _bench_alive(labels.get(PID, ""))
    # the engine's own listing, not the SDK's `containers.list`, which inspects each container
    # it lists: one another run removes meanwhile raised NotFound out of the listing (CI, two
    # docker tests sweeping side by side)
    for c in client.api.containers(all=True, filters={"label": RUN}):
        if ours(c.get("Labels") or {}):
            name = (c.get("Names") or [c["Id"]])[0].lstrip("/")
            try:
                client.api.remove_container(c["Id"], force=True)
            except docker.errors.NotFound:
                continue                 # gone already: what was wanted
            except docker.errors.APIError as exc:
                say(f"could not remove container {name} ({exc}); by hand: docker rm -f {name}")
                continue
            n += 1
    for net in client.networks.list(filters={"label": RUN}):
        if not ours(net.attrs.get("Labels") or {}):
            continue
        try:
            n += _remove_network(net)
        except docker.errors.APIError as exc:
            say(f"could not remove network {net.name} ({exc}); by hand: "
                f"docker network rm {net.name}")
    return n


def _remove_network(net: Any) -> bool:
    """An overlay network frees its endpoints a moment after its containers are gone
    ("has active endpoints"), and the swarm removes it a moment after it was told to:
    each waited for, up to 5 s. True once it is gone, False if it was gone already;
    the engine's last refusal is raised if it stays."""
    import time

    import docker
    removed, refused = False, None
    for _ in range(20):
        try:
            if not removed:
                net.remove()
                removed = True
            net.reload()              # still there: the swarm has not got to it yet
        except docker.errors.NotFound:
            return removed
        except docker.errors.APIError as exc:
            refused = exc             # endpoints still active: tried again below
        time.sleep(0.25)
    if refused is not None:
        raise refused
    return removed                    # told, and still listed after 5 s


def _bench_alive(pid_label: str) -> bool:
    """Whether the bench that labelled something still runs (the engine is on this
    machine): a label that names no process, or a process that is gone, is a dead run."""
    try:
        pid = int(pid_label)
    except ValueError:
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True               # alive, another user's
    return True


def _swarm_manager(client: Any) -> None:
    """--swarm needs the engine to manage a swarm (an attachable overlay network is made
    there); BrokerError saying how, else."""
    swarm = client.info().get("Swarm") or {}
    if swarm.get("LocalNodeState") != "active" or not swarm.get("ControlAvailable"):
        raise BrokerError("--swarm runs on an attachable overlay network, which needs the "
                          "engine to be a swarm manager (state "
                          f"{swarm.get('LocalNodeState', '?')}): docker swarm init "
                          "--advertise-addr <this host's address>")


def _binds(ro: tuple[Path, ...] = (), rw: tuple[Path, ...] = (),
           code: Path = PROJECT) -> dict[str, dict[str, str]]:
    """A container's bind mounts, each at its own absolute path: the project's code (read
    only; `code`: where its engine's host has it) always, then `ro` and `rw`."""
    return {str(p): {"bind": str(p), "mode": mode}
            for paths, mode in (((code, *ro), "ro"), (rw, "rw")) for p in paths}


def broker_command(kind: str, workdir: Path) -> list[str]:
    """The command of a broker container listening on BROKER_PORT (workdir bind-mounted at
    the same path: Mosquitto's configuration and persistence are there)."""
    if kind == "amqtt":
        return ["python", "-m", "bench.substrates.live.amqtt_server", str(BROKER_PORT),
                "0.0.0.0"]
    return ["mosquitto", "-c", str(mosquitto_conf(workdir, "0.0.0.0", BROKER_PORT, user="root"))]


class _Exited:
    """What the live broker watch polls (`proc.poll()`): the container's state, read at
    most every half second."""

    def __init__(self, container: Any) -> None:
        self.container = container
        self.returncode: int | None = None
        self._at = 0.0

    def poll(self) -> int | None:
        import time

        import docker
        now = time.monotonic()
        if now - self._at >= 0.5:
            self._at = now
            try:
                self.container.reload()
                state = self.container.attrs["State"]
                if not state.get("Running") and not state.get("Paused"):
                    self.returncode = int(state.get("ExitCode", -1))
            except docker.errors.NotFound:
                self.returncode = -1
        return self.returncode


class DockerBroker(Broker):
    """amqtt or Mosquitto in a container on the run's network, its port published on
    127.0.0.1 for the bench's own clients (the watch, the nemesis); the nodes reach it by
    the container's name."""

    def __init__(self, kind: str, workdir: Path, client: Any, image: str, network: str,
                 labels: dict[str, str], name: str) -> None:
        super().__init__(kind, "127.0.0.1", free_port(), workdir)
        self.client, self.image, self.network, self.labels = client, image, network, labels
        self.name = name
        self.container: Any = None
        #: where its engine's host has the bench's code and the folder the container binds
        #: (Mosquitto's configuration and persistence)
        self.code, self.binds = PROJECT, workdir

    def command(self) -> list[str]:
        """Its command, its configuration written where the container finds it."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        return broker_command(self.kind, self.workdir)

    def start(self, timeout_s: float | None = 30.0, *, on_second: bool = False,
              version: MqttVersion | None = None) -> None:
        from docker.errors import APIError

        def create() -> None:
            self.container = self.client.containers.create(
                self.image, self.command(), name=self.name,
                labels=self.labels, network=self.network,
                ports={f"{BROKER_PORT}/tcp": (self.host, self.port)},
                volumes=_binds(rw=(self.binds,), code=self.code),
                environment={"PYTHONPATH": str(self.code)}, working_dir=str(self.binds))

        def launch() -> None:
            self.container.start()
            self.proc = _Exited(self.container)  # type: ignore[assignment]
            wait_listening(self.host, self.port, timeout_s or 30.0, None, None)

        def moved() -> None:    # its port is the container's: a new one publishes the new
            with contextlib.suppress(Exception):
                self.container.remove(force=True)
            create()
        if self.container is None:
            create()
        # containers share the host's monotonic clock: the same phase as a process broker;
        # a port taken since it was chosen ("Error starting userland proxy: ... bind:
        # address already in use", a full suite beside a fast-lane loop) as there too
        self.launch_on_a_free_port(launch, on_second, APIError, moved)

    keep_running = False    # --keep: the end of the run leaves it up

    def stop(self) -> None:
        if self.container is not None and not self.keep_running:
            with contextlib.suppress(Exception):
                self.container.stop(timeout=3)      # SIGTERM, then SIGKILL
        self.proc = None

    def kill(self) -> None:
        if self.container is not None:
            with contextlib.suppress(Exception):
                self.container.kill()
                self.container.wait(timeout=10)
        self.proc = None


async def _cut(proc: asyncio.subprocess.Process) -> str:
    """Ends a node's `docker start -ai` if it is still running; says so if it was."""
    if proc.returncode is not None:
        return ""
    proc.kill()
    await proc.wait()
    return CUT.format(ATTACH_DRAIN_S)


class ContainerLauncher:
    """A node process in its own container: `docker start -ai` carries its stdin and stdout
    as a pipe does for `--nodes process`. A crash kills the container (SIGKILL); the next
    start is the same container on the same data dir, started at once and waiting, loaded,
    for its launch spec (as a process node's next process does)."""

    freezer = "docker pause: the cgroup freezer"

    def __init__(self, client: Any, image: str, network: str, labels: dict[str, str],
                 name: str, data_dir: Path, own_image: str | None = None,
                 engine_url: str | None = None, code: Path = PROJECT) -> None:
        self.client, self.network, self.labels = client, network, labels
        #: the engine's URL for the docker CLI (None: DOCKER_HOST's, this machine's), and
        #: where the bench's code is on the engine's host (its data dir is made there)
        self.engine_url, self.code = engine_url, code
        #: anyone's node: a container of its own image, run as its entrypoint says
        self.own_image = own_image
        self.image = own_image or image
        self.name = name
        self.data_dir = data_dir
        self.container: Any = None

    async def spawn(self) -> asyncio.subprocess.Process:
        if self.container is None:
            if self.engine_url is None:   # (another host's engine makes it as it binds it)
                self.data_dir.mkdir(parents=True, exist_ok=True)
            reference = {"command": ["python", "-m", "bench.substrates.live.node_process"],
                         "environment": {"PYTHONPATH": str(self.code)}}
            self.container = await asyncio.get_running_loop().run_in_executor(
                None, lambda: self.client.containers.create(
                    self.image, name=self.name, labels=self.labels, network=self.network,
                    stdin_open=True, volumes=_binds(rw=(self.data_dir,), code=self.code),
                    **({} if self.own_image else reference)))
        # its own session, as a node process: the CLI would proxy a terminal's Ctrl-C into
        # the container
        engine = ["--host", self.engine_url] if self.engine_url else []
        return await asyncio.create_subprocess_exec(
            "docker", *engine, "start", "--attach", "--interactive", self.name,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)

    async def freeze(self, proc: asyncio.subprocess.Process, on: bool) -> None:
        """The cgroup freezer (docker pause): alive, its sockets open, doing nothing."""
        await asyncio.get_running_loop().run_in_executor(
            None, self.container.pause if on else self.container.unpause)

    async def kill(self, proc: asyncio.subprocess.Process) -> str:
        if self.container is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.container.kill)
            # what the node wrote before it died is still on its way through the attach
            # stream: `docker start -ai` ends by itself once it has passed it all on.
            # Killing it at once lost those lines on a loaded machine (a task's SUBMITTED
            # and RUNNING, so the restored task looked as if it never started).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), ATTACH_DRAIN_S)
        return "SIGKILL (docker kill)" + await _cut(proc)

    async def terminate(self, proc: asyncio.subprocess.Process) -> str:
        """`docker stop`: SIGTERM to the container's first process, SIGKILL after STOP_S."""
        if self.container is not None:
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: self.container.stop(timeout=int(STOP_S)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), ATTACH_DRAIN_S)
        return f"SIGTERM (docker stop, SIGKILL after {STOP_S:g} s)" + await _cut(proc)


class ContainerPlacement:
    """The broker and every node in a container of its own on a user network made for the
    run (a bridge, or with --swarm an attachable overlay network), the fault proxies on the
    network's gateway, which the containers reach; an unplugged partition also takes the
    container off the network. Everything made carries the run's labels and is removed at
    the end (--keep: left up, the nodes restarted on their data dirs)."""

    mode = Mode.DOCKER
    hosting = "container"
    links: Links | None = None
    set_clocks: ClockSetter | None = None

    def __init__(self, options: Options, workdir: Path, say: Callable[[str], None]) -> None:
        if options.broker not in ("amqtt", "mosquitto"):
            raise BrokerError(f"--mode docker runs its own broker in a container: --broker "
                              f"amqtt or mosquitto, not {options.broker!r}")
        self.options, self.workdir, self.say = options, workdir, say
        self.client = engine()
        removed = sweep(self.client, say=say)
        if removed:
            say(f"removed {removed} container(s)/network(s) left by earlier runs")
        self.image = ensure(self.client, say)
        self.docker_run = secrets.token_hex(4)
        self.labels = {LABEL: "run", RUN: self.docker_run, PID: str(os.getpid()),
                       **({KEEP: "1"} if options.keep else {})}
        self.launchers: dict[str, ContainerLauncher] = {}
        self._unplugged: dict[int, tuple[str, ...]] = {}   # fault -> nodes off the network
        self.keep = False
        self.broker_container: DockerBroker | None = None
        if options.swarm:
            _swarm_manager(self.client)
        self.network = self.client.networks.create(
            f"a2a-bench-{self.docker_run}", driver="overlay" if options.swarm else "bridge",
            attachable=options.swarm, labels=self.labels)
        try:
            self.network.reload()
            self.proxy_host = "127.0.0.1"
            if not options.swarm:
                config = self.network.attrs["IPAM"]["Config"][0]
                self.proxy_host = config.get("Gateway") or \
                    config["Subnet"].rsplit(".", 1)[0] + ".1"
        except BaseException:
            self.abandon()
            raise

    def abandon(self) -> None:
        """The deployment could not be built: what was made for it goes."""
        sweep(self.client, self.docker_run, self.say)

    def broker(self, options: Options, workdir: Path) -> Broker:
        self.broker_container = DockerBroker(options.broker, workdir / "broker", self.client,
                                             self.image, self.network.name, self.labels,
                                             f"a2a-bench-{self.docker_run}-broker")
        return self.broker_container

    def node_broker(self, broker: Broker) -> tuple[str, int]:
        return (broker.name, BROKER_PORT) if isinstance(broker, DockerBroker) \
            else (broker.host, broker.port)

    def startup_s(self, nodes: int) -> float:
        """Containers started side by side: 10 / 30 / 60 up in 2.7 / 8.6 / 19.9 s here."""
        return 0.3 * nodes

    def node(self, spec: LaunchSpec, log: RunLog, given: NodeSpec) -> LiveNode:
        launcher = ContainerLauncher(self.client, self.image, self.network.name, self.labels,
                                     f"a2a-bench-{self.docker_run}-{spec.config.node_id}",
                                     spec.data_dir, own_image=given.image)
        self.launchers[spec.config.node_id] = launcher
        return ProcessNode(spec, log, launcher)

    async def proxies_starting(self) -> None:
        if self.options.swarm:
            # this host is not on an overlay network: its containers reach it by the
            # docker_gwbridge gateway, which exists once one (the broker) has joined one
            bridge = self.client.networks.get("docker_gwbridge")
            self.proxy_host = bridge.attrs["IPAM"]["Config"][0]["Gateway"]

    def link_cut(self, dep: LiveDeployment, fault: FaultRef, nodes: tuple[str, ...],
                 unplug: bool) -> None:
        """Unplugged, the container is also taken off the run's network (only lo remains),
        as an operator pulling the cable would."""
        if unplug:
            self._unplugged[fault.index] = nodes
            self._network(dep, fault, nodes, connect=False)

    def link_restored(self, dep: LiveDeployment, fault: FaultRef,
                      nodes: tuple[str, ...]) -> None:
        if self._unplugged.pop(fault.index, None):
            self._network(dep, fault, nodes, connect=True)

    def _network(self, dep: LiveDeployment, fault: FaultRef, nodes: tuple[str, ...],
                 connect: bool) -> None:
        """docker network connect/disconnect (70-100 ms each) off the event loop, which
        carries every proxied packet; journaled when it took effect, for the nodes it
        took effect on (what the engine refused is a harness error, not a fired fault)."""
        containers = {n: launcher.container for n in nodes
                      if (launcher := self.launchers.get(n)) is not None
                      and launcher.container is not None}

        def act() -> dict[str, str]:
            refused = {}
            for n, c in containers.items():
                try:
                    (self.network.connect if connect else self.network.disconnect)(c)
                except Exception as exc:  # noqa: BLE001 - whatever the engine said, journaled
                    refused[n] = repr(exc)[:300]
            return refused

        async def run() -> None:
            refused = await dep.loop.run_in_executor(None, act)
            for n, why in refused.items():
                dep.record("nemesis", ev.HarnessError(
                    f"could not {'connect' if connect else 'disconnect'} {n}: {why}",
                    {"fault": fault.kind, "faultIndex": fault.index}))
            done = [n for n in nodes if n in containers and n not in refused]
            if done:
                dep.record("nemesis", ev.FaultFired(fault.kind, fault.index,
                                                    "network connected" if connect else
                                                    "network disconnected (unplugged)",
                                                    {"nodes": list[Json](done)}))
        dep.spawn(run())

    def closing(self, dep: LiveDeployment) -> None:
        self.keep = self.options.keep
        if self.keep and self.broker_container is not None:
            self.broker_container.keep_running = True

    def closed(self, dep: LiveDeployment, completely: bool) -> None:
        if not (completely and self.keep):
            sweep(self.client, self.docker_run, self.say)
            return
        try:
            self._keep(dep)
        except BaseException:
            sweep(self.client, self.docker_run, self.say)
            raise

    def _keep(self, dep: LiveDeployment) -> None:
        """--keep: the run's nodes were stopped (their history is complete); each is started
        again, in a container of the same name on its data dir, from its launch spec in a
        file (as `a2a-bench deploy` runs nodes: until SIGTERM, its history to `docker
        logs`), beside the broker left running."""
        import json

        import docker
        specs = self.workdir / "kept"
        specs.mkdir(parents=True, exist_ok=True)
        own = []
        for node_id, node in dep.nodes.items():
            launcher = self.launchers[node_id]
            if launcher.own_image:   # the --spec FILE form is the reference's (PROTOCOL P-RUN-3)
                own.append(node_id)
                continue
            path = specs / f"{node_id}.json"
            # straight to the broker: the run's fault proxies ended with it
            spec = replace(node.spec, broker=self.node_broker(dep.broker), tls=None)
            path.write_text(json.dumps(spec.to_json()))
            path.chmod(0o600)
            if launcher.container is not None:
                with contextlib.suppress(docker.errors.NotFound):   # gone: what was wanted
                    launcher.container.remove(force=True)
            self.client.containers.run(
                self.image, ["python", "-m", "bench.substrates.live.node_process", "--spec",
                             str(path)],
                name=launcher.name, labels=self.labels, network=self.network.name, detach=True,
                environment={"PYTHONPATH": str(PROJECT), "PYTHONUNBUFFERED": "1"},
                volumes=_binds(ro=(specs,), rw=(node.spec.data_dir,)))
        run = self.docker_run
        if own:
            self.say(f"kept: not {', '.join(own)} (images of their own: their containers "
                     "stay, stopped; `docker start -ai` one and give it a launch spec)")
        self.say(f"kept: broker {dep.broker.url} (container a2a-bench-{run}-broker), "
                 f"{len(dep.nodes) - len(own)} nodes running again on their data dirs (containers "
                 f"a2a-bench-{run}-<node>; their history: docker logs), network "
                 f"a2a-bench-{run}")
        self.say(f"remove it: docker rm -f $(docker ps -aq --filter label={RUN}={run}) "
                 f"&& docker network rm a2a-bench-{run}")


__all__ = ["ContainerPlacement", "sweep", "engine", "wait_listening"]
