"""`--mode docker --hosts FILE`: the docker substrate across several Docker Engines, one on
each host of the inventory, joined into one swarm — the broker a container on the broker
host's engine, each node a container on its own host's engine, all on one attachable
overlay network of the swarm (the nodes reach the broker by its container's name across
engines).

The hosts are reached as `--mode hosts` reaches them (SSH: the bench's code uploaded and
bind-mounted into the containers there, each host's clock measured), and the links between
engines are cut on the hosts themselves (iptables between a node's host and the broker's:
the overlay's VXLAN and the swarm's own traffic both). Everything the run makes on any
engine carries its labels and is removed at its end, whatever ended it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.spec.scenario import Mode
from bench.spec.topology import NodeSpec
from bench.substrates import Options
from bench.substrates.docker.deployment import (
    BROKER_PORT,
    PID,
    RUN,
    ContainerLauncher,
    DockerBroker,
    _swarm_manager,
    broker_command,
    sweep,
)
from bench.substrates.docker.image import LABEL, present, tag
from bench.substrates.hosts.inventory import Host
from bench.substrates.hosts.placement import HostsPlacement
from bench.substrates.hosts.ssh import Ssh
from bench.substrates.live.brokers import Broker, BrokerError
from bench.substrates.live.control import LaunchSpec
from bench.substrates.live.nodes import LiveNode, ProcessNode
from bench.substrates.log import RunLog

if TYPE_CHECKING:
    from bench.substrates.live.deployment import LiveDeployment


def client_of(host: Host) -> Any:
    """The Docker Engine of `host` (its inventory's `docker` URL), or BrokerError."""
    import docker
    try:
        client = docker.DockerClient(base_url=host.docker, use_ssh_client=True)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any way of not reaching it
        raise BrokerError(f"{host.name}'s Docker Engine ({host.docker}) does not answer "
                          f"({type(exc).__name__}: {exc})") from None
    return client


class EngineBroker(DockerBroker):
    """The broker's container on the broker host's engine, its port published on that host's
    address (the inventory's `port`), its configuration and persistence in the run's files
    there."""

    def __init__(self, kind: str, workdir: Path, client: Any, image: str, network: str,
                 labels: dict[str, str], name: str, ssh: Ssh, port: int, remote: str,
                 code: str) -> None:
        super().__init__(kind, workdir, client, image, network, labels, name)
        self.host, self.port, self.ssh = ssh.host.address, port, ssh
        self.code, self.binds = Path(code), Path(remote)

    def command(self) -> list[str]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = broker_command(self.kind, self.workdir)
        if self.kind == "mosquitto":     # written here for its paths there, and put there
            local = self.workdir / "mosquitto.conf"
            self.ssh.run(f"mkdir -p {shlex.quote(str(self.binds))}/mosquitto-data")
            self.ssh.put(f"{self.binds}/mosquitto.conf",
                         local.read_text().replace(str(self.workdir), str(self.binds)).encode())
            command = [c.replace(str(self.workdir), str(self.binds)) for c in command]
        return command

    def launch_on_a_free_port(self, launch: Callable[[], None], on_second: bool,
                              refused: type[Exception],
                              moved: Callable[[], None] = lambda: None) -> None:
        """Its port is the inventory's, on its host: taken there, the start fails saying so."""
        self.starts += 1
        self.launch_in_phase(launch, on_second)


class EnginesPlacement(HostsPlacement):
    """The hosts' placement (SSH, clocks, links cut on the hosts) with containers for
    processes: the broker's on the broker host's engine, each node's on its host's, one
    overlay network of the swarm the engines make (the broker host's engine manages it)."""

    mode = Mode.DOCKER
    hosting = "container"

    def __init__(self, options: Options, workdir: Path, nodes: list[str],
                 cut: dict[int, tuple[str, ...]], say: Callable[[str], None]) -> None:
        super().__init__(options, workdir, nodes, cut)
        self.say = say
        self.run_id = secrets.token_hex(4)
        self.labels = {LABEL: "run", RUN: self.run_id, PID: str(os.getpid())}
        self.clients: dict[str, Any] = {}
        self.network: Any = None
        try:
            used = {self.broker_host.name, *(h.name for h in self.node_hosts.values())}
            self.image = tag()
            for name in sorted(used):
                host = self.inventory.hosts[name]
                client = self.clients[name] = client_of(host)
                removed = sweep(client, say=say)
                if removed:
                    say(f"{name}: removed {removed} container(s)/network(s) left by earlier "
                        "runs")
                if not present(client):
                    raise BrokerError(f"{name}'s engine ({host.docker}) lacks the bench's image "
                                      f"{self.image}: docker save {self.image} | docker -H "
                                      f"{host.docker} load")
            manager = self.clients[self.broker_host.name]
            _swarm_manager(manager)
            self.network = manager.networks.create(
                f"a2a-bench-{self.run_id}", driver="overlay", attachable=True,
                labels=self.labels)
            for line in self.sharing():
                say(line)
        except BaseException:
            self.abandon()
            raise

    def broker(self, options: Options, workdir: Path) -> Broker:
        name = self.broker_host.name
        return EngineBroker(options.broker, workdir / "broker", self.clients[name], self.image,
                            self.network.name, self.labels, f"a2a-bench-{self.run_id}-broker",
                            self.ssh[name], self.inventory.port, f"{self.remote}/{name}/broker",
                            self.code[name])

    def node_broker(self, broker: Broker) -> tuple[str, int]:
        assert isinstance(broker, EngineBroker)
        return broker.name, BROKER_PORT

    def startup_s(self, nodes: int) -> float:
        """Containers on several engines, side by side (one engine: 0.3 s a node)."""
        return 2.0 + 0.3 * nodes

    def node(self, spec: LaunchSpec, log: RunLog, given: NodeSpec) -> LiveNode:
        host, spec = self.on_its_host(spec, log)
        launcher = ContainerLauncher(
            self.clients[host.name], self.image, self.network.name, self.labels,
            f"a2a-bench-{self.run_id}-{spec.config.node_id}", spec.data_dir,
            engine_url=host.docker, code=Path(self.code[host.name]))
        return ProcessNode(spec, log, launcher)

    def _engines_swept(self) -> None:
        """Every container of the run off every engine, then its network off the swarm."""
        for name, client in self.clients.items():
            if name != self.broker_host.name:
                sweep(client, self.run_id, self.say)
        if self.broker_host.name in self.clients:
            sweep(self.clients[self.broker_host.name], self.run_id, self.say)
        for client in self.clients.values():
            with contextlib.suppress(Exception):   # its connection pool only: nothing to undo
                client.close()

    def closed(self, dep: LiveDeployment, completely: bool) -> None:
        """The hosts' links healed first (a run interrupted mid-partition still has its
        rules there, and the swarm cannot free the overlay's endpoints on an engine it
        cannot reach), then every container and the network off every engine."""
        try:
            super().closed(dep, completely)
        finally:
            self._engines_swept()

    def abandon(self) -> None:
        try:
            self._engines_swept()
        finally:
            super().abandon()


__all__ = ["EnginesPlacement", "client_of"]
