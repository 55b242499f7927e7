"""The simulation substrate: a simpy model of an MQTT broker and of the links to it,
driving the very same reference node core as every other substrate.

`SUBSTRATE` describes it to the layers above (`bench.substrates.descriptor`): a broker
model instead of a broker, the reference core only, virtual time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.spec.brokers import version_refusal
from bench.spec.scenario import Mode, Scenario
from bench.spec.topology import BrokerModel
from bench.substrates.descriptor import (
    HOSTS_ARE_HOSTS,
    KEEP_IS_DOCKERS,
    SWARM_IS_DOCKERS,
    Choice,
    Identity,
    flags_given,
    own_nodes_refusal,
)

if TYPE_CHECKING:
    from bench.history import Recorder
    from bench.substrates import Deployment, Options
    from bench.variants import Variant

#: A matrix cell of the simulation that runs the topology's own broker model.
OWN_MODEL = "sim"


class Sim:
    mode = Mode.SIM
    wall_clock = False
    clock_word = "simulated"
    timers_late_ms = 0.0
    records_late_ms = 0.0
    #: a million lines a minute: flushed four times a second, not each (bench.history)
    history_flush_s = 0.25
    offer = "--mode sim for the simulator"

    def refusal(self, scenario: Scenario, choice: Choice) -> str | None:
        if choice.wire_tap:
            return ("--wire-tap: the simulator has no wire to tap (its broker's account is "
                    "the history); use --mode live")
        own = own_nodes_refusal(scenario, runs_commands=False, runs_images=False)
        if own is not None:
            return own
        models = [m.value for m in BrokerModel]
        if choice.broker is not None and choice.broker not in models:
            return (f"--broker={choice.broker}: a simulation takes a broker model, one of "
                    f"{', '.join(models)} (a URL names a live broker: add --mode live)")
        if choice.keep:
            return KEEP_IS_DOCKERS
        if choice.swarm:
            return SWARM_IS_DOCKERS
        if choice.hosts:
            return HOSTS_ARE_HOSTS
        live_only = flags_given(choice, "nodes", "broker_ca", "restart_command",
                                "no_isolation")
        if live_only:
            return (f"{', '.join(live_only)} appl{'ies' if len(live_only) == 1 else 'y'} to "
                    "live runs only; a simulation runs the simulator's broker model "
                    f"({scenario.topology.broker.value}; --broker chooses another) and its "
                    "nodes in its own loop")
        # the model copies its broker, MQTT versions included: an MQTT 5 run on the model
        # of a broker that speaks 3.1.1 only simulated a broker that does not exist (the
        # fidelity matrix's A2A cells on amqtt judged it for expiries it never offered)
        model = scenario.topology.broker.value if choice.broker in (None, OWN_MODEL) \
            else choice.broker
        return version_refusal(scenario, model, " or generic")

    def prepare(self, scenario: Scenario, choice: Choice) -> tuple[Scenario, Options]:
        from bench.substrates import Options
        model = None if choice.broker in (None, OWN_MODEL) else choice.broker
        scenario = scenario.with_broker_model(model)
        return scenario, Options(broker=scenario.topology.broker.live_default,
                                 node_commands=choice.node_commands)

    def identity(self, scenario: Scenario, options: Options) -> Identity:
        return Identity("sim", "sim", scenario.topology.broker.value)

    def expect(self, scenario: Scenario, options: Options) -> dict[str, str]:
        return scenario.expect_sim()

    def header(self, scenario: Scenario, options: Options) -> str:
        return f" (broker model {scenario.topology.broker.value})"

    def replay(self, scenario: Scenario, options: Options) -> list[str]:
        return ["--broker", scenario.topology.broker.value]

    def open(self, scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path,
             options: Options, say: Callable[[str], None]) -> Deployment:
        from bench.substrates.sim.deployment import SimDeployment
        return SimDeployment(scenario, variant, recorder)

    def unspoken(self, scenario: Scenario, broker: str) -> str | None:
        return version_refusal(scenario, broker, " or generic")

    def brokers(self, installed: bool = False) -> tuple[str, ...]:
        # the brokers it has a model of (spec/brokers.py), installed wherever the bench is
        return tuple(m.value for m in BrokerModel if m is not BrokerModel.GENERIC)

    def cells(self, brokers: list[str], models: list[str], hostings: list[str],
              scenario_nodes: str | None) -> list[tuple[str, str]]:
        return [(m, "inproc") for m in models]

    def cell_name(self, broker: str, nodes: str) -> list[str]:
        return [] if broker == OWN_MODEL else [broker]

    def cell_choice(self, broker: str, nodes: str) -> Choice:
        return Choice(broker=None if broker == OWN_MODEL else broker)

    def unmodelled(self, scenario: Scenario, broker: str) -> dict[str, str]:
        return dict(scenario.unmodelled.get(broker, {}))

    def place(self, broker: str, nodes: str) -> str:
        # only a simulation that copies a live broker's model is compared with that broker
        return "sim (own model)" if broker == OWN_MODEL else "sim"

    def label(self, recorded: dict[str, object]) -> str:
        model = recorded.get("model")
        return f"sim (broker model {model})" if model else "sim"

    def tag(self, recorded: dict[str, object]) -> str:
        model = recorded.get("model")
        return f"sim/{model}" if model else "sim"


SUBSTRATE = Sim()
