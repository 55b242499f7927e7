"""The live substrate: real MQTT brokers on 127.0.0.1 (embedded amqtt, Mosquitto, or any
broker URL), reference nodes on asyncio in-process or one OS process each, real sockets,
real QoS1 and real SIGKILLs — driving the same core as the simulator.

`SUBSTRATE` describes it to the layers above (`bench.substrates.descriptor`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core.events import WALL_CLOCK_RECORDS_LATE_MS as RECORDS_LATE_MS
from bench.core.events import WALL_CLOCK_TIMERS_LATE_MS as TIMERS_LATE_MS
from bench.spec.brokers import version_refusal as spoken_refusal
from bench.spec.scenario import Mode, Scenario
from bench.spec.topology import BrokerModel, MqttVersion
from bench.substrates.descriptor import (
    HOSTS_ARE_HOSTS,
    KEEP_IS_DOCKERS,
    SWARM_IS_DOCKERS,
    Choice,
    Identity,
    flags_given,
    own_nodes_refusal,
)
from bench.substrates.live.kinds import KINDS

if TYPE_CHECKING:
    from bench.history import Recorder
    from bench.substrates import Deployment, Options
    from bench.variants import Variant

#: How long a broker named by URL has to answer before a run is refused.
EXTERNAL_REACH_S = 5.0
EMBEDDED = ("amqtt", "mosquitto")     # the brokers the simulator models (spec/brokers.py)


def sim_only_refusal(scenario: Scenario) -> str | None:
    """A scenario that declares itself simulation only, on a real substrate."""
    if scenario.sim_only:
        return f"{scenario.source}: simulation only ({scenario.sim_only}); run it with --mode sim"
    return None


def broker_refusal(spec: str, ca_file: str | None,
                   version: MqttVersion | None = None) -> str | None:
    """Why `--broker spec` cannot be used, in one line, or None: a value that names no
    broker, or a broker named by URL that does not answer MQTT (it is spoken to once, in
    `version`; None: either)."""
    from bench.substrates import shown_url
    from bench.substrates.live.brokers import (
        MOSQUITTO_MISSING,
        BrokerError,
        make_broker,
        mosquitto_exe,
    )
    if spec == "mosquitto" and mosquitto_exe() is None:
        return f"--broker=mosquitto: {MOSQUITTO_MISSING}" + (
            "; MQTT 5 runs on Mosquitto or an mqtt:// broker that speaks it (the embedded "
            "amqtt speaks 3.1.1 only; moat-lib-mqtt was tried and fails what the scenarios "
            "need: docs/findings/moat-lib-mqtt.md)" if version is MqttVersion.V5 else "")
    if spec in KINDS and not KINDS[spec].installed:
        return f"--broker={spec}: {KINDS[spec].missing()}"
    try:
        broker = make_broker(spec, Path("."), ca_file=ca_file)
        if broker.kind == "external":
            broker.start(timeout_s=EXTERNAL_REACH_S, version=version)
    except BrokerError as exc:
        return (f"--broker={shown_url(spec)}: {exc}" if "--broker" not in str(exc)
                else str(exc))
    return None


def version_refusal(scenario: Scenario, broker: str) -> str | None:
    """Why `broker` cannot carry the scenario's MQTT version, in one line, or None."""
    from bench.spec.brokers import BEHAVIOURS
    kind = KINDS.get(broker)
    # (a broker the simulator models is refused in its row's words)
    if kind is not None and broker not in BEHAVIOURS and scenario.mqtt not in kind.speaks:
        others = [k for k, v in KINDS.items() if scenario.mqtt in v.speaks]
        return (f"{scenario.source}: MQTT {scenario.mqtt.value} on {broker}: {kind.title} "
                f"{kind.pinned} speaks MQTT {' and '.join(v.value for v in kind.speaks)} only "
                f"(`a2a-bench brokers --broker {broker}`); use --broker "
                f"{' | '.join(others)} or an mqtt:// broker that speaks it"
                + ("" if scenario.mqtt_fixed else
                   f", or --mqtt {kind.speaks[0].value}"))
    return spoken_refusal(scenario, broker, " or an mqtt:// broker that speaks 5")


class Placed:
    """What the substrates that place a live deployment themselves (docker's containers,
    hosts by SSH) say alike: a wall clock, a broker the bench starts (amqtt or Mosquitto)
    and one matrix cell per broker. Each names its `mode`, `hosting` (how its nodes are
    hosted, as identity and a cell name them) and `place` (its fidelity column)."""

    mode: Mode
    hosting: str
    place_name: str
    wall_clock = True
    clock_word = "run"
    timers_late_ms = TIMERS_LATE_MS
    records_late_ms = RECORDS_LATE_MS
    history_flush_s: float | None = None

    def identity(self, scenario: Scenario, options: Options) -> Identity:
        return Identity(options.shown_broker, self.hosting)

    def expect(self, scenario: Scenario, options: Options) -> dict[str, str]:
        return scenario.expect_for(options.broker)

    def unspoken(self, scenario: Scenario, broker: str) -> str | None:
        return version_refusal(scenario, broker)

    def brokers(self, installed: bool = False) -> tuple[str, ...]:
        return EMBEDDED

    def cells(self, brokers: list[str], models: list[str], hostings: list[str],
              scenario_nodes: str | None) -> list[tuple[str, str]]:
        return [(b, self.hosting) for b in brokers]

    def cell_name(self, broker: str, nodes: str) -> list[str]:
        return [broker]

    def cell_choice(self, broker: str, nodes: str) -> Choice:
        return Choice(broker=broker)

    def unmodelled(self, scenario: Scenario, broker: str) -> dict[str, str]:
        return {}

    def place(self, broker: str, nodes: str) -> str:
        return self.place_name

    def tag(self, recorded: dict[str, object]) -> str:
        return f"{self.mode.value}/{recorded.get('broker')}"

    @staticmethod
    def deployed(scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path,
                 options: Options, say: Callable[[str], None], placement: Any) -> Deployment:
        """The live deployment on `placement`; what the placement made goes if it cannot
        be built."""
        from bench.substrates.live.deployment import LiveDeployment
        try:
            return LiveDeployment(scenario, variant, recorder, workdir, options, say, placement)
        except BaseException:
            placement.abandon()
            raise


class Live:
    mode = Mode.LIVE
    wall_clock = True
    clock_word = "run"
    timers_late_ms = TIMERS_LATE_MS
    records_late_ms = RECORDS_LATE_MS
    history_flush_s: float | None = None
    offer = "--mode live for a real broker and nodes"

    def refusal(self, scenario: Scenario, choice: Choice) -> str | None:
        own = own_nodes_refusal(scenario, runs_commands=True, runs_images=False)
        if own is not None:
            return own
        if choice.keep:
            return KEEP_IS_DOCKERS
        if choice.swarm:
            return SWARM_IS_DOCKERS
        if choice.hosts:
            return HOSTS_ARE_HOSTS
        if choice.broker == BrokerModel.GENERIC.value:
            return ("--broker=generic is a simulated broker model; live, give "
                    f"{', '.join(KINDS)} or an mqtt:// URL")
        only = sim_only_refusal(scenario)
        if only is not None:
            return only
        broker = choice.broker or scenario.topology.broker.live_default_for(scenario.mqtt)
        if (refused := version_refusal(scenario, broker)) is not None:
            return refused
        external = flags_given(choice, "restart_command", "no_isolation")
        if broker in KINDS and external:
            return (f"{', '.join(external)}: for a broker by URL (--broker mqtt://…); the "
                    f"bench starts {broker} itself, for this run alone, and restarts it itself")
        if broker not in KINDS and not choice.restart_command:
            for spec in scenario.faults:
                if spec.kind == "broker_restart":
                    return (f"{scenario.source}: faults[{spec.index}] broker_restart needs "
                            "--broker-restart-command to restart an external broker (the "
                            "bench cannot restart what it did not start)")
        return broker_refusal(broker, choice.broker_ca, scenario.mqtt)

    def prepare(self, scenario: Scenario, choice: Choice) -> tuple[Scenario, Options]:
        from bench.substrates import Hosting, Options
        return scenario, Options(
            broker=choice.broker or scenario.topology.broker.live_default_for(scenario.mqtt),
            hosting=Hosting(choice.nodes or scenario.live_nodes or "inproc"),
            restart_command=choice.restart_command, isolate=not choice.no_isolation,
            broker_ca=choice.broker_ca, node_commands=choice.node_commands,
            wire_tap=choice.wire_tap)

    def identity(self, scenario: Scenario, options: Options) -> Identity:
        return Identity(options.shown_broker, options.hosting.value)

    def expect(self, scenario: Scenario, options: Options) -> dict[str, str]:
        return scenario.expect_for(options.broker)

    def header(self, scenario: Scenario, options: Options) -> str:
        # nodes with a command of their own are processes whatever --nodes says (issue 50:
        # an A2A run said "inproc nodes" with the responder under test a process)
        own = [n.id for n in scenario.topology.nodes if n.command]
        if own and options.hosting.value == "inproc":
            rest = len(scenario.topology.nodes) - len(own)
            return (f" on {options.shown_broker} with {', '.join(own)} as processes of "
                    f"their own" + (f", {rest} inproc" if rest else ""))
        return f" on {options.shown_broker} with {options.hosting.value} nodes"

    def replay(self, scenario: Scenario, options: Options) -> list[str]:
        return ["--broker", options.shown_broker, "--nodes", options.hosting.value]

    def open(self, scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path,
             options: Options, say: Callable[[str], None]) -> Deployment:
        from bench.substrates.live.deployment import LiveDeployment
        return LiveDeployment(scenario, variant, recorder, workdir, options, say)

    def unspoken(self, scenario: Scenario, broker: str) -> str | None:
        return version_refusal(scenario, broker)

    def brokers(self, installed: bool = False) -> tuple[str, ...]:
        return tuple(k for k, kind in KINDS.items() if not installed or kind.installed)

    def cells(self, brokers: list[str], models: list[str], hostings: list[str],
              scenario_nodes: str | None) -> list[tuple[str, str]]:
        # a scenario whose fault needs a node process runs its "inproc" cells as processes
        return [(b, "process" if h == "inproc" and scenario_nodes == "process" else h)
                for b in brokers for h in hostings]

    def cell_name(self, broker: str, nodes: str) -> list[str]:
        return [broker] if nodes == "inproc" else [broker, nodes]

    def cell_choice(self, broker: str, nodes: str) -> Choice:
        return Choice(broker=broker, nodes=nodes)

    def unmodelled(self, scenario: Scenario, broker: str) -> dict[str, str]:
        return {}

    def place(self, broker: str, nodes: str) -> str:
        return "live" if nodes == "inproc" else f"live {nodes}"

    def label(self, recorded: dict[str, object]) -> str:
        return (f"live on {recorded.get('broker', '?')} "
                f"({recorded.get('nodes', '?')} nodes)")

    def tag(self, recorded: dict[str, object]) -> str:
        return f"live/{recorded.get('broker')}/{recorded.get('nodes')}"


SUBSTRATE = Live()
