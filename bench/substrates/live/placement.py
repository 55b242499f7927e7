"""Where a live deployment puts its broker, its nodes and its fault proxies' listening side:
the contract one live deployment runs on every placement with (this machine's processes
and event loop, containers, whatever comes later), and this machine's own placement.

A placement starts nothing of the run's by itself: the deployment asks it for a broker,
for each node, and tells it when links are cut and restored and when the run closes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bench.faults.primitives import FaultRef, Outcome
from bench.spec.distribution import Distribution
from bench.spec.scenario import Mode
from bench.spec.topology import NodeSpec
from bench.substrates import Hosting, Options
from bench.substrates.live.brokers import Broker, make_broker
from bench.substrates.live.control import LaunchSpec
from bench.substrates.live.nodes import InprocNode, LiveNode, LocalProcess, ProcessNode
from bench.substrates.log import RunLog

if TYPE_CHECKING:
    from bench.substrates.live.deployment import LiveDeployment


class Links(Protocol):
    """A placement's own hands on the links between nodes and broker (the hosts' iptables
    and tc): where it has them, link faults go to them and no fault proxy is put in front
    of the nodes for them."""

    async def down(self, dep: LiveDeployment, fault: FaultRef, nodes: tuple[str, ...],
                   unplug: bool, direction: str = "both") -> Outcome: ...

    async def up(self, dep: LiveDeployment, fault: FaultRef,
                 nodes: tuple[str, ...]) -> Outcome: ...

    async def latency(self, fault: FaultRef, nodes: tuple[str, ...],
                      latency_ms: Distribution | None) -> Outcome: ...

    async def loss(self, fault: FaultRef, nodes: tuple[str, ...],
                   probability: float) -> Outcome: ...


class ClockSetter(Protocol):
    """A placement's own hands on its hosts' clocks (`date -s` there): where it has them for
    a node's host, the clock_skew fault sets that host's clock — every process there reads
    it — instead of the node's own offset."""

    def sets(self, node: str) -> bool:
        """Whether it sets the clock of `node`'s host."""

    async def skew(self, fault: FaultRef, node: str, skew_ms: float) -> Outcome:
        """`node`'s host's clock set `skew_ms` off the time it keeps (0: back)."""


class Placement(Protocol):
    """Where the deployment's parts run."""

    #: the substrate the history names (run_started)
    mode: Mode
    #: how its nodes are hosted, as the history names it (run_started's node_hosting)
    hosting: str
    #: where the fault proxies listen for their nodes (the nodes must reach it)
    proxy_host: str
    #: its own hands on the links (None: link faults are the fault proxies')
    links: Links | None
    #: its own hands on its hosts' clocks (None: clock_skew offsets the node's own clock)
    set_clocks: ClockSetter | None

    def broker(self, options: Options, workdir: Path) -> Broker:
        """The run's broker, not started yet."""

    def node_broker(self, broker: Broker) -> tuple[str, int]:
        """Where the nodes reach the broker (the bench's own clients use `broker.host`)."""

    def startup_s(self, nodes: int) -> float:
        """About how long `nodes` nodes take to come up here, started side by side."""

    def node(self, spec: LaunchSpec, log: RunLog, given: NodeSpec) -> LiveNode:
        """The node of `spec` (`given`: the topology's, with its own command or image)."""

    async def proxies_starting(self) -> None:
        """Called once before the fault proxies start (the broker is up by then)."""

    def link_cut(self, dep: LiveDeployment, fault: FaultRef, nodes: tuple[str, ...],
                 unplug: bool) -> None:
        """The proxies cut these nodes' links (`unplug`: the cable pulled, not a blackhole);
        a placement that can also act on the network itself does so here."""

    def link_restored(self, dep: LiveDeployment, fault: FaultRef,
                      nodes: tuple[str, ...]) -> None: ...

    def closing(self, dep: LiveDeployment) -> None:
        """The run ends: everything of it is about to be stopped."""

    def closed(self, dep: LiveDeployment, completely: bool) -> None:
        """Everything the deployment stopped is stopped (`completely`: without an error);
        whatever the placement made for the run goes too."""


class Hookless:
    """The hooks of a placement that has nothing of its own to do around the proxies, the
    links and the run's end (a subclass overrides those it has)."""

    async def proxies_starting(self) -> None:
        return None

    def link_cut(self, dep: LiveDeployment, fault: FaultRef, nodes: tuple[str, ...],
                 unplug: bool) -> None:
        return None

    def link_restored(self, dep: LiveDeployment, fault: FaultRef,
                      nodes: tuple[str, ...]) -> None:
        return None

    def closing(self, dep: LiveDeployment) -> None:
        return None

    def closed(self, dep: LiveDeployment, completely: bool) -> None:
        return None


class LocalPlacement(Hookless):
    """This machine: the broker a child process (or external), the nodes on the bench's
    event loop (`inproc`) or one OS process each (`process`), the proxies on 127.0.0.1
    (they are the whole link here: no hook of its own)."""

    mode = Mode.LIVE
    proxy_host = "127.0.0.1"
    links: Links | None = None
    set_clocks: ClockSetter | None = None

    def __init__(self, options: Options) -> None:
        self.options = options
        self.hosting = options.hosting.value

    def broker(self, options: Options, workdir: Path) -> Broker:
        return make_broker(options.broker, workdir / "broker",
                           restart_command=options.restart_command, ca_file=options.broker_ca)

    def node_broker(self, broker: Broker) -> tuple[str, int]:
        return broker.host, broker.port

    def startup_s(self, nodes: int) -> float:
        """Measured on this machine: inproc 0.04 s for 4, 3.0 s for 100; processes 0.6 s
        for 4, started side by side."""
        per = 0.03 * nodes
        return per if self.options.hosting is Hosting.INPROC else 0.5 + per

    def node(self, spec: LaunchSpec, log: RunLog, given: NodeSpec) -> LiveNode:
        if given.command:     # anyone's node: a process whatever --nodes says
            return ProcessNode(spec, log, LocalProcess(given.command))
        return InprocNode(spec, log) if self.options.hosting is Hosting.INPROC \
            else ProcessNode(spec, log, LocalProcess())
