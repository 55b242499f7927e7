"""The docker substrate: the broker and every node in a container of its own, faults done
the way an operator's world does them (kill, pause, network disconnect, iptables).

`SUBSTRATE` describes it to the layers above (`bench.substrates.descriptor`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.spec.scenario import Mode, Scenario
from bench.substrates.descriptor import Choice, own_nodes_refusal, url_broker_refusal
from bench.substrates.live import EMBEDDED, Placed, sim_only_refusal, version_refusal

if TYPE_CHECKING:
    from bench.history import Recorder
    from bench.substrates import Deployment, Options
    from bench.variants import Variant


def missing_images(scenario: Scenario) -> list[str]:
    """The nodes' own images this engine does not have (none, if no engine answers: the
    deployment then says so itself)."""
    try:
        import docker

        from bench.substrates.docker.deployment import engine
        client = engine()
    except Exception:   # noqa: BLE001 - no engine: the deployment's start says so, once
        return []
    missing = []
    for image in sorted({n.image for n in scenario.topology.nodes if n.image}):
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            missing.append(image)
    return missing


class Docker(Placed):
    mode = Mode.DOCKER
    hosting = "container"
    place_name = "docker"
    offer = "--mode docker for containers"

    def refusal(self, scenario: Scenario, choice: Choice) -> str | None:
        own = own_nodes_refusal(scenario, runs_commands=False, runs_images=True)
        if own is not None:
            return own
        if scenario.image_nodes and (missing := missing_images(scenario)):
            return (f"image {missing[0]!r} (a node's own: image = in a topology, or conform "
                    f"--image) is not on this Docker engine: build it first (docker build "
                    f"-t {missing[0]} …); `docker images` lists what is")
        if (choice.broker or "amqtt") not in EMBEDDED:
            return (f"--broker={choice.broker}: --mode docker runs its broker in a container: "
                    "amqtt or mosquitto")
        if choice.nodes:
            return "--nodes applies to --mode live; in docker every node is a container"
        if choice.hosts:
            from bench.substrates.hosts import on_hosts_refusal
            if scenario.image_nodes or choice.node_images:
                return (f"{scenario.topology.source}: nodes of their own images run on one "
                        "engine (--mode docker without --hosts)")
            why = on_hosts_refusal(scenario, choice, choice.hosts, "docker")
            if why is not None:
                return why
        elif (external := url_broker_refusal(
                choice, "--mode docker starts its own broker in a container, for this run "
                        "alone")) is not None:
            return external
        broker = choice.broker or scenario.topology.broker.live_default_for(scenario.mqtt)
        return version_refusal(scenario, broker) or sim_only_refusal(scenario)

    def prepare(self, scenario: Scenario, choice: Choice) -> tuple[Scenario, Options]:
        from bench.substrates import Options
        return scenario, Options(
            broker=choice.broker or scenario.topology.broker.live_default_for(scenario.mqtt),
            restart_command=choice.restart_command, isolate=not choice.no_isolation,
            broker_ca=choice.broker_ca, keep=choice.keep, swarm=choice.swarm,
            node_commands=choice.node_commands, node_images=choice.node_images,
            wire_tap=choice.wire_tap,
            hosts=str(Path(choice.hosts).resolve()) if choice.hosts else None)

    def header(self, scenario: Scenario, options: Options) -> str:
        if options.hosts:
            return (f" on {options.shown_broker}, the broker and every node in a container "
                    f"on the engines of the hosts of {options.hosts} (one swarm's overlay)")
        return (f" on {options.shown_broker}, every node in a container"
                + (" on a swarm's overlay network" if options.swarm else ""))

    def replay(self, scenario: Scenario, options: Options) -> list[str]:
        return ["--broker", options.shown_broker] + \
            (["--hosts", options.hosts] if options.hosts else [])

    def open(self, scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path,
             options: Options, say: Callable[[str], None]) -> Deployment:
        workdir = workdir.resolve()   # bind-mounted at the same absolute paths
        if options.hosts:
            from bench.substrates.docker.engines import EnginesPlacement
            from bench.substrates.hosts import latency_refused, link_cuts
            engines = EnginesPlacement(options, workdir, [n.id for n in scenario.topology.nodes],
                                       link_cuts(scenario), say)
            latency_refused(scenario, engines)
            return self.deployed(scenario, variant, recorder, workdir, options, say, engines)
        from bench.substrates.docker.deployment import ContainerPlacement
        return self.deployed(scenario, variant, recorder, workdir, options, say,
                             ContainerPlacement(options, workdir, say))

    def label(self, recorded: dict[str, object]) -> str:
        return f"docker on {recorded.get('broker', '?')} (container nodes)"


SUBSTRATE = Docker()
