"""The substrates a scenario runs on — the simulator and live brokers and nodes — as
siblings behind one small interface, `Deployment`; plus the back-to-back wire for tests.

A deployment owns its clock and its time: the run loop (`bench.loop`) only schedules
callbacks on it, lets time run, hands it workload operations and fault primitives, and
asks whether it is quiet. Everything a deployment records goes through its `RunLog`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from bench.core.auth import AuthConfig, KeyRing, Secret
from bench.core.config import NodeConfig
from bench.core.events import Event, RunStarted
from bench.core.topics import DEFAULT_PREFIX
from bench.faults.primitives import Outcome, Primitive
from bench.history import Recorder
from bench.protocols import DEFAULT as DEFAULT_PROTOCOL
from bench.protocols import protocol
from bench.spec.distribution import rng_for
from bench.spec.scenario import Mode, Scenario
from bench.spec.topology import NodeSpec, Topology
from bench.substrates.descriptor import Choice, Identity, Substrate
from bench.substrates.log import RunLog
from bench.variants import Variant
from bench.workload import Op

__all__ = ["BrokerRefused", "Choice", "Deployment", "EnvironmentFailure", "Hosting", "Identity", "Mode", "Options",
           "RunLog", "SelfCheckFailed", "Substrate", "keyring", "node_configs",
           "open_deployment", "substrate", "variant_refusal"]


class Hosting(StrEnum):
    """How live nodes run: on the bench's event loop, or one OS process each."""

    INPROC = "inproc"
    PROCESS = "process"


class EnvironmentFailure(RuntimeError):
    """The environment failed the run (a node that never came up, an image that could not be
    built): said in one line, exit 2, never a traceback — it is not the bench's bug."""


class SelfCheckFailed(EnvironmentFailure):
    """A node did not come up the way seed 002 §11.3's four start-up lines say it must."""


class BrokerRefused(SelfCheckFailed):
    """The broker refused a node's CONNECT (a will on a topic it keeps to itself, a login, a
    version): this broker cannot carry the run as set up — a setup error, exit 3."""


@dataclass(frozen=True, slots=True)
class Options:
    """How to deploy, beyond the scenario. The simulator has no such choices: its broker
    is the topology's model and its nodes run in its own loop."""

    broker: str = "amqtt"                  # amqtt | mosquitto | mqtt://[user:pw@]host[:port]
    hosting: Hosting = Hosting.INPROC
    restart_command: str | None = None     # an external broker's restart, for broker_restart
    link_faults: bool = False              # some fault acts on links: nodes behind the proxy
    #: an external broker: the run's own client ids and topic prefix (its run id added),
    #: and its sessions and retained messages cleared at the end
    isolate: bool = True
    broker_ca: str | None = None           # an mqtts:// broker: the CA file to verify it by
    keep: bool = False                     # docker: leave the deployment up after the run
    swarm: bool = False                    # docker: the run's network an overlay of a swarm
    #: --node-command ROLE=CMD as given (the topology already carries them): for the replay
    node_commands: tuple[str, ...] = ()
    #: --node-image ROLE=IMAGE as given (the topology already carries them): for the replay
    node_images: tuple[str, ...] = ()
    #: a wire tap in front of every node, not only those a command of their own starts
    wire_tap: bool = False
    #: --mode hosts: the inventory file (the hosts, how to reach them, what runs where)
    hosts: str | None = None
    #: node processes' stderr on the bench's stderr as well as in the run folder's logs/
    #: (conform keeps it to the logs: its table is what it prints)
    echo_node_stderr: bool = True

    @property
    def shown_broker(self) -> str:
        """The broker as it may be printed or recorded: never with its password."""
        return shown_url(self.broker)


def shown_url(spec: str) -> str:
    """`spec` with the password of an mqtt://user:password@host URL masked."""
    from urllib.parse import urlparse
    password = urlparse(spec).password if "://" in spec else None
    return spec if password is None else spec.replace(f":{password}@", ":***@", 1)


class Deployment(Protocol):
    """One scenario deployed on a substrate: a broker, its nodes, a clock."""

    mode: Mode
    seed: int
    topology: Topology
    jitter_ms: float          # how precisely it hits a scheduled moment
    clock_origin_ms: int      # wall time (Unix ms) at the run clock's zero: node clocks read it
    poll_ms: float            # how often a drain asks whether the run is quiet
    log: RunLog

    def start(self) -> list[str]:
        """Bring the broker and every node up; returns the nodes' self-check lines, raises
        SelfCheckFailed if one did not come up."""

    def now_ms(self) -> float:
        """The run's clock, in ms (virtual in sim, since the run started live)."""

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> None: ...

    def run_until(self, t_ms: float) -> None:
        """Let time pass until `t_ms`, carrying out whatever is due meanwhile."""

    def issue(self, op: Op) -> None:
        """Hand a workload operation to its node (recorded as not issued if it is down)."""

    def act(self, step: Primitive, done: Callable[[Outcome], None]) -> None:
        """Carry out a fault primitive; `done` gets Done or an explicit Refused, now or later."""

    def config(self, node: str) -> NodeConfig:
        """The node's configuration as it currently runs (after any reconfiguring fault)."""

    def booted_at_ms(self, node: str) -> float: ...

    def record(self, node: str, event: Event) -> None: ...

    def settled(self) -> bool:
        """Nothing left to settle, run or deliver, so a drain may stop early."""

    def close(self) -> dict[str, Any]:
        """Stop everything it started, whatever state it is in; returns its statistics."""


def keyring(scenario: Scenario) -> KeyRing:
    """Keys derived from the seed (so a replay signs alike); never written anywhere."""
    mode = scenario.auth.keys
    if mode == "none":
        return KeyRing()
    rng = rng_for(scenario.seed, "keys")
    flat = Secret(rng.randbytes(24).hex())
    if mode == "flat":
        return KeyRing(flat_token=flat)
    agents = sorted({a for n in scenario.topology.nodes for a in n.agents})
    return KeyRing(flat_token=flat, agent_keys={a: Secret(rng.randbytes(24).hex()) for a in agents})


def _deploy(scenario: Scenario) -> Any:
    """The hooks of the scenario's protocol for what a deployment gives its nodes (None:
    nothing beyond the bench's own)."""
    return protocol(scenario.protocol).module("deploy")


def node_config(node: NodeSpec, scenario: Scenario, keys: KeyRing,
                run_id: str | None = None) -> NodeConfig:
    """The node's configuration; with a `run_id`, its client id and topic prefix carry it
    (a run on a broker others use: nothing of it meets another run's sessions or topics)."""
    prefix = DEFAULT_PREFIX if run_id is None else f"{DEFAULT_PREFIX}/run-{run_id}"
    hooks = _deploy(scenario)
    return NodeConfig(node.id, node.namespace, node.agents, node.scene_groups,
                      client_id_of(node, scenario, run_id),
                      prefix=prefix,
                      auth=AuthConfig(scenario.auth.mode, keys,
                                      scenario.auth.signature_of(node.id)),
                      task_timeout_ms=scenario.workload.task_timeout_ms,
                      request_timeout_ms=scenario.workload.request_timeout_ms,
                      directory_scope=scenario.topology.directory_scope(node),
                      **({} if hooks is None else hooks.node_fields(node, scenario, run_id)))


def client_id_of(node: NodeSpec, scenario: Scenario, run_id: str | None = None) -> str:
    """The MQTT client id the deployment gives `node`: its topology's, or its protocol's
    (an A2A-over-MQTT agent's `{org}/{unit}/{agent}`, A2M-SESS-3), with a run's id appended
    when the run is isolated; empty: the node id."""
    hooks = _deploy(scenario)
    given = hooks.client_id(node, scenario.topology) if hooks is not None else node.client_id
    return given if run_id is None else f"{given or node.id}-{run_id}"


def node_configs(scenario: Scenario, run_id: str | None = None) -> dict[str, NodeConfig]:
    keys = keyring(scenario)
    return {n.id: node_config(n, scenario, keys, run_id) for n in scenario.topology.nodes}


def run_started(scenario: Scenario, variant: Variant, mode: Mode, broker: str | None = None,
                broker_url: str | None = None, node_hosting: str | None = None,
                run_id: str | None = None) -> RunStarted:
    """The first event of every run (the seed protocol's is not named: a history that names
    none is the seed protocol's)."""
    given = {n.id: c for n in scenario.topology.nodes
             if (c := client_id_of(n, scenario, run_id))}
    hooks = _deploy(scenario)
    return RunStarted(scenario.name, variant.name, scenario.seed, scenario.topology.name,
                      len(scenario.topology.nodes), mode.value, broker, broker_url, node_hosting,
                      scenario.workload.task_timeout_ms, run_id, scenario.auth.mode,
                      substrate(mode).timers_late_ms, given, scenario.mqtt.value,
                      substrate(mode).records_late_ms,
                      protocol=None if scenario.protocol == DEFAULT_PROTOCOL
                      else scenario.protocol,
                      capacities={n.id: n.capacity for n in scenario.topology.nodes
                                  if n.capacity is not None} or None,
                      **({} if hooks is None else hooks.run_fields(scenario.topology, run_id)))


#: The package that describes each substrate (its SUBSTRATE): one per Mode.
PACKAGES = {"sim": "bench.substrates.sim", "live": "bench.substrates.live",
            "docker": "bench.substrates.docker", "hosts": "bench.substrates.hosts"}


def substrate(mode: Mode | str) -> Substrate:
    """The descriptor of `mode`'s substrate: what the layers above ask instead of comparing
    modes (`bench.substrates.descriptor`)."""
    import importlib
    described: Substrate = importlib.import_module(PACKAGES[Mode(mode).value]).SUBSTRATE
    return described


def variant_refusal(chosen: Variant, scenario: Scenario) -> str | None:
    """Why `chosen` would change nothing in `scenario`, in one line, or None: a defect of
    one protocol's reference node on a topology of another, or of nodes that all run a
    program of their own there. Run anyway, the report and its replay line would name a
    defect no node ran."""
    alters = chosen.alters
    if alters is None:
        return None
    name, roles = alters
    topology = scenario.topology
    spoken = protocol(topology.protocol)
    if spoken.name != name:
        return (f"--variant {chosen.name} is a defect of {protocol(name).title}'s reference "
                f"node; topology {topology.name!r} speaks {spoken.title} (`a2a-bench list` "
                "names each variant's scenario)")
    replaced = [n for n in topology.nodes if n.role.value in roles]
    if replaced and all(n.external for n in replaced):
        return (f"--variant {chosen.name} replaces the reference node of "
                f"{', '.join(n.id for n in replaced)}, and each runs a program of its own "
                "here: no node would run the defect")
    return None


def open_deployment(mode: Mode, scenario: Scenario, variant: Variant, recorder: Recorder,
                    workdir: Path, options: Options,
                    say: Callable[[str], None] = lambda line: None) -> Deployment:
    """The deployment of `scenario` on `mode`'s substrate (not started yet)."""
    return substrate(mode).open(scenario, variant, recorder, workdir, options, say)
