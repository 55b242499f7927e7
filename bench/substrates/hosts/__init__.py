"""The hosts substrate (`--mode hosts --hosts FILE`): the live run with its broker and every
node on hosts the bench reaches by SSH, Jepsen's way — the code uploaded, each process
started there and its history streamed back, each host's clock measured, and link faults
made on the hosts with iptables and tc netem, process faults with signals sent there.

`SUBSTRATE` describes it to the layers above (`bench.substrates.descriptor`). The
inventory (`bench.substrates.hosts.inventory`) says where everything runs;
`python -m bench.tools.hosts up 3` makes hosts of network namespaces on this machine.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.spec.scenario import Mode, Scenario
from bench.substrates.descriptor import (
    KEEP_IS_DOCKERS,
    SWARM_IS_DOCKERS,
    Choice,
    own_nodes_refusal,
    url_broker_refusal,
)
from bench.substrates.live import EMBEDDED, Placed, sim_only_refusal, version_refusal

if TYPE_CHECKING:
    from bench.history import Recorder
    from bench.substrates import Deployment, Options
    from bench.substrates.hosts.placement import HostsPlacement
    from bench.variants import Variant

#: where a matrix's hosts cells find their inventory (a cell has no --hosts of its own)
HOSTS_ENV = "A2A_BENCH_HOSTS"
#: the link faults the hosts carry out themselves (iptables; latency: tc netem); the fault
#: proxy's others (inside MQTT packets: withheld PUBACKs, tampering, refused publishes)
#: are not done here
ON_HOSTS = frozenset({"partition", "latency", "loss"})


def link_cuts(scenario: Scenario) -> dict[int, tuple[str, ...]]:
    """The nodes of each fault done on their hosts, by its index: link faults (a host's
    link is cut) and clock_skew (where a host's clock is set) reach whatever shares the
    host."""
    return {f.index: tuple(f.params["nodes"]) if "nodes" in f.params else (f.params["node"],)
            for f in scenario.faults if f.kind in ON_HOSTS or f.kind == "clock_skew"}


def latency_refused(scenario: Scenario, placement: HostsPlacement) -> None:
    """BrokerError before the run, where the scenario slows links and a host's kernel has
    neither netem nor NFQUEUE (the placement abandoned); where it lacks only netem, the
    placement holds the packets in an NFQUEUE instead (`netem_refusal` says so to it)."""
    from bench.substrates.live.brokers import BrokerError
    try:
        if any(f.kind == "latency" for f in scenario.faults) \
                and (why := placement.netem_refusal()) is not None:
            raise BrokerError(f"{scenario.source}: {why}")
    except BaseException:
        placement.abandon()
        raise


def inventory_of(choice: Choice) -> str | None:
    return choice.hosts or os.environ.get(HOSTS_ENV) or None


def on_hosts_refusal(scenario: Scenario, choice: Choice, given: str, mode: str) -> str | None:
    """Why `scenario` cannot run with its broker and nodes on the hosts of the inventory
    `given` (`--mode hosts`, or docker's engines on them), or None: what needs the fault
    proxy (which is not put between hosts) or this machine's own files is refused."""
    from bench.faults import CATALOGUE
    from bench.spec.distribution import SpecError
    from bench.substrates.hosts.inventory import load_inventory
    try:
        inventory = load_inventory(Path(given))
    except SpecError as exc:
        return str(exc)
    if mode == "docker":
        for host in inventory.hosts.values():
            if host.docker is None:
                return (f"{given}: hosts.{host.name}.docker: expected its Docker Engine (a "
                        "DOCKER_HOST URL): --mode docker --hosts puts a container on each "
                        "host's engine")
    if choice.keep:
        return KEEP_IS_DOCKERS if mode == "hosts" else \
            "--keep: a deployment across hosts is removed at the end of its run"
    external = url_broker_refusal(choice, f"--mode {mode} --hosts starts its own broker on a "
                                          "host")
    if external is not None:
        return external
    if scenario.topology.node_tls:
        return (f"{scenario.topology.source}: the nodes' TLS is offered by the fault proxy "
                f"in front of each, and --mode {mode} puts none between hosts: use --mode "
                "live, or docker on one engine")
    if choice.wire_tap:
        return (f"--wire-tap: --mode {mode} puts no proxy between hosts (their links are "
                "the hosts' own); use --mode live, or docker on one engine")
    for spec in scenario.faults:
        kind = CATALOGUE[spec.kind]
        if kind.on_link(spec.params) and spec.kind not in ON_HOSTS:
            return (f"{scenario.source}: faults[{spec.index}] {spec.kind} works inside MQTT "
                    f"packets, the fault proxy's work, and --mode {mode} puts no proxy "
                    f"between hosts (it does {', '.join(sorted(ON_HOSTS))} with iptables and "
                    "tc): use --mode live, or docker on one engine")
        if spec.kind == "directory_wipe":
            return (f"{scenario.source}: faults[{spec.index}] directory_wipe removes a file "
                    "from the node's data folder, which is on its host: not done there yet; "
                    "use --mode live, or docker on one engine")
        if spec.kind == "partition" and spec.params.get("how") == "unplug":
            return (f"{scenario.source}: faults[{spec.index}] partition how=\"unplug\": a "
                    "cable pulled from a host would cut the bench's SSH to it too; "
                    f"--mode {mode} --hosts partitions by iptables (how = \"blackhole\")")
    return None


class Hosts(Placed):
    mode = Mode.HOSTS
    hosting = "hosts"
    place_name = "hosts"
    offer = "--mode hosts --hosts FILE across hosts"

    def refusal(self, scenario: Scenario, choice: Choice) -> str | None:
        own = own_nodes_refusal(scenario, runs_commands=False, runs_images=False)
        if own is not None:
            return own
        given = inventory_of(choice)
        if given is None:
            return (f"--mode hosts needs --hosts FILE, the inventory of the hosts to run on "
                    f"(or {HOSTS_ENV}); `python -m bench.tools.hosts up 3` makes three "
                    "on this machine and prints one")
        if (choice.broker or "amqtt") not in EMBEDDED:
            return (f"--broker={choice.broker}: --mode hosts starts its broker on a host: "
                    "amqtt or mosquitto")
        if choice.nodes:
            return "--nodes applies to --mode live; on hosts every node is a process of its own"
        if choice.swarm:
            return SWARM_IS_DOCKERS
        why = on_hosts_refusal(scenario, choice, given, "hosts")
        if why is not None:
            return why
        broker = choice.broker or scenario.topology.broker.live_default_for(scenario.mqtt)
        return version_refusal(scenario, broker) or sim_only_refusal(scenario)

    def prepare(self, scenario: Scenario, choice: Choice) -> tuple[Scenario, Options]:
        from bench.substrates import Hosting, Options
        return scenario, Options(
            broker=choice.broker or scenario.topology.broker.live_default_for(scenario.mqtt),
            hosting=Hosting.PROCESS, hosts=str(Path(str(inventory_of(choice))).resolve()))

    def header(self, scenario: Scenario, options: Options) -> str:
        return f" on {options.shown_broker}, the broker and every node on the hosts of " \
               f"{options.hosts}"

    def replay(self, scenario: Scenario, options: Options) -> list[str]:
        return ["--broker", options.shown_broker, "--hosts", str(options.hosts)]

    def open(self, scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path,
             options: Options, say: Callable[[str], None]) -> Deployment:
        from bench.substrates.hosts.placement import HostsPlacement
        placement = HostsPlacement(options, workdir, [n.id for n in scenario.topology.nodes],
                                   link_cuts(scenario))
        for line in placement.sharing():
            say(line)
        latency_refused(scenario, placement)
        return self.deployed(scenario, variant, recorder, workdir, options, say, placement)

    def label(self, recorded: dict[str, object]) -> str:
        return f"hosts on {recorded.get('broker', '?')} (nodes on hosts by SSH)"


SUBSTRATE = Hosts()
