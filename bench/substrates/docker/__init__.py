"""The docker substrate: the broker and every node in a container of its own, faults done
the way an operator's world does them (kill, pause, network disconnect, iptables).

`SUBSTRATE` describes it to the layers above (`bench.substrates.descriptor`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.core.events import WALL_CLOCK_RECORDS_LATE_MS as RECORDS_LATE_MS
from bench.core.events import WALL_CLOCK_TIMERS_LATE_MS as TIMERS_LATE_MS
from bench.spec.scenario import Mode, Scenario
from bench.substrates.descriptor import HOSTS_ARE_HOSTS, Choice, Identity, own_nodes_refusal
from bench.substrates.live import EMBEDDED, sim_only_refusal, version_refusal

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


class Docker:
    mode = Mode.DOCKER
    wall_clock = True
    clock_word = "run"
    timers_late_ms = TIMERS_LATE_MS
    records_late_ms = RECORDS_LATE_MS
    history_flush_s: float | None = None

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
            return HOSTS_ARE_HOSTS
        broker = choice.broker or scenario.topology.broker.live_default_for(scenario.mqtt)
        return version_refusal(scenario, broker) or sim_only_refusal(scenario)

    def prepare(self, scenario: Scenario, choice: Choice) -> tuple[Scenario, Options]:
        from bench.substrates import Options
        return scenario, Options(
            broker=choice.broker or scenario.topology.broker.live_default_for(scenario.mqtt),
            restart_command=choice.restart_command, isolate=not choice.no_isolation,
            broker_ca=choice.broker_ca, keep=choice.keep, swarm=choice.swarm,
            node_commands=choice.node_commands, node_images=choice.node_images,
            wire_tap=choice.wire_tap)

    def identity(self, scenario: Scenario, options: Options) -> Identity:
        return Identity(options.shown_broker, "container")

    def expect(self, scenario: Scenario, options: Options) -> dict[str, str]:
        return scenario.expect_for(options.broker)

    def header(self, scenario: Scenario, options: Options) -> str:
        return (f" on {options.shown_broker}, every node in a container"
                + (" on a swarm's overlay network" if options.swarm else ""))

    def replay(self, scenario: Scenario, options: Options) -> list[str]:
        return ["--broker", options.shown_broker]

    def open(self, scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path,
             options: Options, say: Callable[[str], None]) -> Deployment:
        from bench.substrates.docker.deployment import ContainerPlacement
        from bench.substrates.live.deployment import LiveDeployment
        workdir = workdir.resolve()   # bind-mounted at the same absolute paths
        placement = ContainerPlacement(options, workdir, say)
        try:
            return LiveDeployment(scenario, variant, recorder, workdir, options, say, placement)
        except BaseException:
            placement.abandon()
            raise

    def unspoken(self, scenario: Scenario, broker: str) -> str | None:
        return version_refusal(scenario, broker)

    def brokers(self, installed: bool = False) -> tuple[str, ...]:
        return EMBEDDED      # each in a container of the bench's image

    def cells(self, brokers: list[str], models: list[str], hostings: list[str],
              scenario_nodes: str | None) -> list[tuple[str, str]]:
        return [(b, "container") for b in brokers]

    def cell_name(self, broker: str, nodes: str) -> list[str]:
        return [broker]

    def cell_choice(self, broker: str, nodes: str) -> Choice:
        return Choice(broker=broker)

    def unmodelled(self, scenario: Scenario, broker: str) -> dict[str, str]:
        return {}

    def place(self, broker: str, nodes: str) -> str:
        return "docker"

    def label(self, recorded: dict[str, object]) -> str:
        return f"docker on {recorded.get('broker', '?')} (container nodes)"

    def tag(self, recorded: dict[str, object]) -> str:
        return f"docker/{recorded.get('broker')}"


SUBSTRATE = Docker()
