"""Scenario and topology files (TOML): loading and validation.

Every error is a `SpecError` naming the file, the key and what was expected, e.g.
`scenarios/x.toml: faults[2].probability=1.5 must be within [0, 1]`; the CLI turns it
into exit code 3.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from bench.core.auth import AuthMode, SignatureVersion
from bench.faults import CATALOGUE, FaultSpec, parse_fault
from bench.protocols import DEFAULT as DEFAULT_PROTOCOL
from bench.protocols import (
    owner_of_key,
    owner_of_role,
    owners_of_workload_key,
    protocol,
    protocols,
)
from bench.spec.brokers import BEHAVIOURS, CLIENT
from bench.spec.distribution import Distribution, SpecError, parse_distribution
from bench.spec.topology import (
    BrokerModel,
    LinkSpec,
    MqttVersion,
    NodeSpec,
    Role,
    Topology,
)
from bench.workload import NEEDS, WorkloadSpec, idle_keys

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"
TOPOLOGIES = REPO / "topologies"


class Mode(StrEnum):
    """The substrate a scenario runs on (DESIGN §1)."""

    LIVE = "live"   # real brokers and nodes, wall-clock time
    SIM = "sim"     # the simpy model, virtual time, seeded and exactly replayable
    DOCKER = "docker"   # the live run with the broker and every node in containers
    HOSTS = "hosts"     # the live run with the broker and every node on hosts by SSH


MODES = tuple(m.value for m in Mode)
#: A scenario that names no mode runs live. What each mode means is its substrate's to say
#: (`bench.substrates.substrate`): nothing here or above the substrates compares modes.
DEFAULT_MODE = "live"

VERDICT_WORDS = ("true", "false", "unknown", "either")   # either: judged, TRUE or FALSE
#: The brokers the bench starts by name (`bench/substrates/live/kinds.py`; a test holds the
#: two lists equal): a scenario may expect other verdicts live on one of them
#: (`[expect.<broker>]`), as a broker matrix runs it on each.
BROKERS_BY_NAME = ("amqtt", "mosquitto", "moat-lib-mqtt", "iotcore", "rumqttd", "rmqttd",
                   "rabbitmq", "ejabberd")

#: What one machine can hold, refused before anything is built (issue: a topology with
#: `count = 1000000000` ran for ten minutes at 3.4 GB before anyone knew). The simulator
#: ran 10,000 nodes with a namespace-scoped directory in 1.2 GB and 1,000 with a global
#: one (N² announcements as the mesh starts) in 0.94 GB (docs: "At scale"); 100,000 scoped
#: is issue 51's row (docs/findings/scale.md).
MAX_NODES = 100_000
MAX_NODES_GLOBAL_DIRECTORY = 2_000
#: Requests a run may plan in all (rate × duration × orchestrators): each is a few history
#: lines and some checker state per line, and 1.3 M lines took 0.5 GB to judge.
MAX_PLANNED_REQUESTS = 2_000_000


@dataclass(frozen=True, slots=True)
class AuthSpec:
    mode: AuthMode = AuthMode.LOOSE
    signature: SignatureVersion = SignatureVersion.V1
    keys: str = "none"            # none | flat | per-agent
    #: node id -> the signature version that node signs with (a mixed fleet mid-migration)
    signature_by_node: tuple[tuple[str, SignatureVersion], ...] = ()

    def signature_of(self, node_id: str) -> SignatureVersion:
        return dict(self.signature_by_node).get(node_id, self.signature)

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode.value, "signature": int(self.signature.value), "keys": self.keys,
                "signature_by_node": {n: int(v.value) for n, v in self.signature_by_node}}


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    topology: Topology
    mode: Mode
    seed: int
    duration_ms: float
    drain_ms: float
    auth: AuthSpec
    workload: WorkloadSpec
    faults: tuple[FaultSpec, ...]
    expect: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    #: [expect.amqtt], [expect.mosquitto]: what differs on that broker in a live run
    expect_by_broker: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: why the scenario can only run in simulation (a fault hours after the workload), or None
    sim_only: str | None = None
    #: how its live nodes run unless told (`live_nodes = "process"`: a fault an inproc node cannot
    #: take, such as pause); None: inproc
    live_nodes: str | None = None
    #: [unmodelled.amqtt]: checker -> why a simulation with that broker's model does not
    #: show the verdict the live broker gives (its expectation there is the [expect] one)
    unmodelled: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: the MQTT version the run speaks (the scenario's `mqtt`, else its topology's)
    mqtt: MqttVersion = MqttVersion.V311
    #: MQTT 5: the Session Expiry Interval the nodes' CONNECTs ask for (`session_expiry_s`);
    #: a persistent session outlives its connection this long. On 3.1.1 it never expires.
    session_expiry_s: int = CLIENT.session_expiry_s

    def expect_for(self, broker: str | None) -> dict[str, str]:
        """The verdicts expected of a run: live on `broker` (amqtt, mosquitto), or in
        simulation (None: the model's own, `sim_broker`): where a broker strays, its
        simulation strays the same way, and is expected to."""
        return {**self.expect, **self.expect_by_broker.get(broker or "", {})}

    def expect_sim(self) -> dict[str, str]:
        """What a simulation expects: the live broker's expectations where its model
        reproduces them, the scenario's own where the scenario says it does not."""
        model = self.sim_broker or ""
        gaps = self.unmodelled.get(model, {})
        return {**self.expect, **{k: v for k, v in self.expect_by_broker.get(model, {}).items()
                                  if k not in gaps}}

    @property
    def protocol(self) -> str:
        """The protocol its nodes speak (its topology's `protocol`), as run_started says it
        (the checkers it is judged by follow from it)."""
        return self.topology.protocol

    @property
    def mqtt_fixed(self) -> bool:
        """Whether its protocol fixes the MQTT version (the A2A-over-MQTT profile is MQTT 5
        only, A2M-SESS-1): no `--mqtt` may change it."""
        return protocol(self.topology.protocol).mqtt_fixed

    @property
    def sim_broker(self) -> str | None:
        """The real broker a simulation of this scenario copies (None: generic 3.1.1)."""
        model = self.topology.broker
        return None if model is BrokerModel.GENERIC else model.value

    def with_node_command(self, role: str, command: tuple[str, ...]) -> Scenario:
        """Every node of `role` started by `command` (anyone's node) instead of the
        reference; SpecError if the topology has no node of that role (on an A2A-over-MQTT
        topology `requester` and `responder` name its roles too)."""
        return self._with_nodes(role, "--node-command", command=command, image=None)

    def with_node_image(self, role: str, image: str, flag: str = "--image") -> Scenario:
        """Every node of `role` a container of `image` (anyone's node, --mode docker), as
        with_node_command; `flag` names what asked for it in an error."""
        return self._with_nodes(role, flag, command=(), image=image)

    def _with_nodes(self, role: str, flag: str, **given: Any) -> Scenario:
        roles = protocol(self.topology.protocol).roles
        named = roles[role].value if role in roles else role
        if not any(n.role.value == named for n in self.topology.nodes):
            raise SpecError(f"{flag} {role}=…: topology {self.topology.name} has no "
                            f"node of role {role!r}")
        nodes = tuple(replace(n, **given) if n.role.value == named else n
                      for n in self.topology.nodes)
        return replace(self, topology=replace(self.topology, nodes=nodes))

    def squeezed(self, duration_s: float, timeout_ms: int | None = None) -> Scenario:
        """The scenario shortened to `duration_s` for a quick live run (the tests,
        `a2a-bench conform`): fault times, windows and redelivery delays scale with the
        duration; requests time out sooner (4 s) so the drain is short — longer where
        people decide at gates: 6 s, or 15 s where some of them think for up to 8 s."""
        gated = self.workload.process_fraction > 0 and self.workload.gate_fraction > 0
        slow = any(kind == "slow" and weight > 0 for kind, weight in self.workload.humans)
        timeout_ms = timeout_ms or (15_000 if gated and slow else 6_000 if gated else 4_000)
        f = min(1.0, duration_s * 1000 / self.duration_ms)
        faults = []
        for spec in self.faults:
            params = dict(spec.params)
            delay = params.get("delay_ms")
            if isinstance(delay, Distribution) and delay.kind == "uniform":
                lo, hi = delay.params
                params["delay_ms"] = Distribution("uniform", (lo * f, hi * f))
            faults.append(replace(spec, at_ms=spec.at_ms * f, params=params,
                                  duration_ms=None if spec.duration_ms is None
                                  else spec.duration_ms * f))
        # the live drain stops at quiescence, so a generous bound costs nothing when all is
        # well and keeps a long-tail task on a loaded machine from ending the run UNKNOWN
        return replace(self, duration_ms=self.duration_ms * f, drain_ms=timeout_ms + 15_000,
                       faults=tuple(faults),
                       workload=replace(self.workload, request_timeout_ms=timeout_ms,
                                        gate_timeout_ms=max(3_000, int(self.workload.gate_timeout_ms * f))))

    @property
    def command_nodes(self) -> tuple[str, ...]:
        """The nodes a command of their own starts (not the reference)."""
        return tuple(n.id for n in self.topology.nodes if n.command)

    @property
    def image_nodes(self) -> tuple[str, ...]:
        """The nodes an image of their own is (--mode docker; not the reference)."""
        return tuple(n.id for n in self.topology.nodes if n.image)

    def with_broker_model(self, model: str | None) -> Scenario:
        """The same scenario with the simulated broker copying `model` (None: as it is)."""
        if model is None or model == self.topology.broker.value:
            return self
        return replace(self, topology=replace(self.topology, broker=BrokerModel(model)))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "source": self.source,
                "topology": self.topology.name, "mode": self.mode, "seed": self.seed,
                "duration_s": self.duration_ms / 1000, "drain_s": self.drain_ms / 1000,
                "auth": self.auth.to_json(), "workload": self.workload.to_json(),
                "faults": [f.to_json() for f in self.faults], "expect": dict(self.expect),
                "expect_by_broker": {b: dict(e) for b, e in self.expect_by_broker.items()},
                "unmodelled": {b: dict(e) for b, e in self.unmodelled.items()},
                "mqtt": self.mqtt.value,
                **({"session_expiry_s": self.session_expiry_s}
                   if self.session_expiry_s != CLIENT.session_expiry_s else {})}


class _Table:
    """Typed reads from one TOML table, each error naming file and key."""

    def __init__(self, raw: Any, where: str, allowed: set[str]) -> None:
        if not isinstance(raw, Mapping):
            raise SpecError(f"{where} must be a table")
        extra = sorted(set(raw) - allowed)
        if extra:
            raise SpecError(f"{where.removesuffix(': ')}: unknown key(s) {extra} (expected some "
                            f"of {sorted(allowed)})")
        self.raw, self.where = raw, where

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if not self.where.endswith(": ") else f"{self.where}{name}"

    def text(self, name: str, default: str | None = None) -> str:
        v = self.raw.get(name, default)
        if not isinstance(v, str) or not v:
            raise SpecError(f"{self.key(name)}={v!r} must be a non-empty string")
        return v

    def choice(self, name: str, options: tuple[str, ...], default: str) -> str:
        v = self.raw.get(name, default)
        if v not in options:
            raise SpecError(f"{self.key(name)}={v!r} must be one of {list(options)}")
        return str(v)

    def number(self, name: str, default: float, *, low: float = 0.0, high: float | None = None,
               strict_low: bool = False) -> float:
        v = self.raw.get(name, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise SpecError(f"{self.key(name)}={v!r} must be a number")
        if v < low or (strict_low and v == low) or (high is not None and v > high):
            bound = f"within [{low:g}, {high:g}]" if high is not None else \
                f"{'>' if strict_low else '>='} {low:g}"
            raise SpecError(f"{self.key(name)}={v!r} must be {bound}")
        return float(v)

    def integer(self, name: str, default: int, low: int = 0) -> int:
        v = self.raw.get(name, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise SpecError(f"{self.key(name)}={v!r} must be an integer >= {low}")
        return v

    def boolean(self, name: str, default: bool) -> bool:
        v = self.raw.get(name, default)
        if not isinstance(v, bool):
            raise SpecError(f"{self.key(name)}={v!r} must be true or false")
        return v

    def texts(self, name: str) -> tuple[str, ...]:
        v = self.raw.get(name, [])
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise SpecError(f"{self.key(name)}={v!r} must be a list of non-empty strings")
        return tuple(v)


def read_toml(path: Path, what: str = "file") -> dict[str, Any]:
    """The TOML file at `path`; SpecError, naming it, if it is missing, unreadable or not
    TOML (a directory, a file without read permission, bytes that are not UTF-8)."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise SpecError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise SpecError(f"{path}: is a directory; expected a TOML {what}") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: not valid TOML ({exc})") from None


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def find(name_or_path: str, folder: Path, what: str) -> Path:
    """A path as given, else `<folder>/<name>.toml`."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or "/" in name_or_path:
        return p
    candidate = folder / f"{name_or_path}.toml"
    if candidate.exists():
        return candidate
    if p.is_dir():
        raise SpecError(f"{name_or_path}: is a directory; expected a {what} file (.toml) or "
                        f"the name of one in {_display(folder)}")
    known = sorted(x.stem for x in folder.glob("*.toml") if not x.name.endswith(".matrix.toml"))
    close = difflib.get_close_matches(name_or_path, known, n=3)
    raise SpecError(f"no {what} named {name_or_path!r} in {_display(folder)}" +
                    (f"; did you mean {' or '.join(map(repr, close))}?" if close else
                     " (`a2a-bench list` names them all)"))


# -- topologies --------------------------------------------------------------------------------

def _link(raw: Any, where: str) -> LinkSpec:
    t = _Table(raw, where, {"latency_ms", "loss"})
    latency = parse_distribution(t.raw.get("latency_ms", 1.0), t.key("latency_ms"))
    return LinkSpec(latency, t.number("loss", 0.0, high=0.99))


def load_topology(path: Path) -> Topology:
    f = _display(path)
    raw = read_toml(path)
    sections = {p.section for p in protocols().values() if p.section}
    top = _Table(raw, f + ": ", {"name", "description", "broker", "link", "nodes", "directory",
                                  "protocol", *sections})
    directory = top.choice("directory", ("global", "namespace"), "global")
    spoken = protocol(top.text("protocol", DEFAULT_PROTOCOL), top.key("protocol"))
    for key in set(raw) - spoken.topology_keys:
        if (other := owner_of_key(key, top=True)) is not None:
            raise SpecError(f"{top.key(key)}: a topology key of {other.title}; this topology "
                            f"speaks {spoken.title}")
    for key in sections - {spoken.section}:
        if key in raw:
            owner = owner_of_key(key, section=True)
            assert owner is not None
            raise SpecError(f"{top.key(key)}: [{key}] holds the settings of {owner.title}; "
                            f"this topology speaks {spoken.title} — add protocol = "
                            f"\"{owner.name}\" to speak {owner.title}")
    own = spoken.module("settings")
    if spoken.section is not None and spoken.section not in raw:
        raise SpecError(f"{f}: protocol = \"{spoken.name}\" needs its [{spoken.section}] table")
    settings: dict[str, Any] = {} if own is None or spoken.section is None else own.read(
        raw[spoken.section], f"{f}: {spoken.section}", _Table)
    broker = _Table(raw.get("broker", {}), f"{f}: broker", {"model", "mqtt"})
    model = BrokerModel(broker.choice("model", tuple(m.value for m in BrokerModel), "generic"))
    version = _mqtt_version(broker, spoken.mqtt.value)
    if version not in spoken.mqtt_versions:
        raise SpecError(f"{broker.key('mqtt')}={version.value!r}: {spoken.mqtt_why}")
    link = _link(raw.get("link", {}), f"{f}: link")
    nodes_raw = raw.get("nodes")
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise SpecError(f"{f}: nodes must be a non-empty array of tables ([[nodes]])")
    nodes: list[NodeSpec] = []
    for i, n in enumerate(nodes_raw):
        t = _Table(n, f"{f}: nodes[{i}]", {"id", "role", "namespace", "agents", "scene_groups",
                                           "client_id", "link", "count", "command", "image",
                                           "pool", "hands_over_to", "pool_shared",
                                           "capacity"})
        count = t.integer("count", 1, low=1)
        if len(nodes) + count > MAX_NODES:
            raise SpecError(f"{t.key('count')}={count}: the topology would have "
                            f"{len(nodes) + count:,} nodes, more than the {MAX_NODES:,} one "
                            "machine holds (10,000 simulated nodes took 1.2 GB)")
        base_id = t.text("id")
        named = t.raw.get("role", "executor")
        owner = owner_of_role(named) if isinstance(named, str) else None
        if owner is not None and owner is not spoken:
            raise SpecError(f"{t.key('role')}={named!r} is a role of {owner.title}: the "
                            f"topology needs protocol = \"{owner.name}\"")
        named = t.choice("role", (*(r.value for r in Role), *spoken.roles), "executor")
        role = spoken.roles.get(named) or Role(named)
        for key in set(n) - spoken.node_keys:
            if (other := owner_of_key(key)) is not None:
                raise SpecError(f"{t.key(key)}: a node key of {other.title}; this topology "
                                f"speaks {spoken.title}")
        pool = t.text("pool") if "pool" in n else None
        if pool is not None and role is not Role.EXECUTOR:
            raise SpecError(f"{t.key('pool')}: only a responder of an A2A-over-MQTT topology "
                            "serves a pool")
        hands_over_to = t.text("hands_over_to") if "hands_over_to" in n else None
        if hands_over_to is not None and (role is not Role.EXECUTOR
                                          or count > 1 or pool is not None):
            raise SpecError(f"{t.key('hands_over_to')}: only a responder of an A2A-over-MQTT "
                            "topology, one node (no count) serving no pool, hands its tasks "
                            "over")
        pool_shared = t.boolean("pool_shared", True)
        if not pool_shared and (pool is None or count > 1):
            raise SpecError(f"{t.key('pool_shared')}=false: a responder that serves a pool "
                            "(pool = ...), one node (no count), subscribes the pool's topic "
                            "itself — its pool's only member")
        capacity = t.integer("capacity", 0, low=1) if "capacity" in n else None
        if capacity is not None and role is not Role.EXECUTOR:
            raise SpecError(f"{t.key('capacity')}: only a responder of an A2A-over-MQTT "
                            "topology runs a bounded number of tasks")
        ns = t.text("namespace")
        if "." in ns:
            raise SpecError(f"{t.key('namespace')}={ns!r} must not contain '.'")
        agents_t, groups_t = t.texts("agents"), t.texts("scene_groups")
        node_link = _link(n["link"], t.key("link")) if "link" in n else None
        command = t.texts("command") if "command" in n else ()
        if "command" in n and not command:
            raise SpecError(f"{t.key('command')}: a command is a non-empty list of strings "
                            "(the program, then its arguments)")
        image = t.text("image") if "image" in n else None
        if image is not None and (not image.strip() or command):
            raise SpecError(f"{t.key('image')}={image!r}: expected an image name (docker images "
                            "lists them), and not beside a command (one is --mode live's, the "
                            "other --mode docker's)")
        for k in range(1, count + 1):
            def expand(s: str, k: int = k, count: int = count) -> str:
                return s.replace("{i}", str(k)) if count > 1 else s
            node_id = f"{base_id}-{k}" if count > 1 else base_id
            agents = tuple(expand(a) for a in agents_t)
            for a in agents:
                if a.partition(".")[0] != ns or "." not in a:
                    raise SpecError(f"{t.key('agents')}: {a!r} must be '{ns}.<capability>' "
                                    f"(the node's namespace)")
            client = t.raw.get("client_id", "")
            if not isinstance(client, str):
                raise SpecError(f"{t.key('client_id')}={client!r} must be a string")
            if own is not None:
                own.check_node(t, ns, agents, pool)
            nodes.append(NodeSpec(node_id, role, ns, agents, tuple(expand(g) for g in groups_t),
                                  expand(client), node_link, tuple(command), image, pool,
                                  hands_over_to, pool_shared, capacity))
    seen: set[str] = set()
    for n in nodes:
        if n.id in seen:
            raise SpecError(f"{f}: nodes: id {n.id!r} appears twice (node ids must be unique)")
        seen.add(n.id)
    by_id = {n.id: n for n in nodes}
    for i, n in enumerate(nodes):
        if n.hands_over_to is None:
            continue
        to = by_id.get(n.hands_over_to)
        if to is None or to is n or to.role is not Role.EXECUTOR or to.hands_over_to \
                or to.namespace != n.namespace or to.pool:
            raise SpecError(f"{f}: nodes[{i}].hands_over_to={n.hands_over_to!r}: expected the "
                            f"id of another responder of unit {n.namespace!r} that serves no "
                            f"pool and hands nothing over itself; responders: "
                            f"{sorted(x.id for x in nodes if x.role is Role.EXECUTOR)}")
    pools: dict[tuple[str | None, str], list[str]] = {}     # (once: N² at 100,000 nodes)
    for x in nodes:
        pools.setdefault((x.pool, x.namespace), []).append(x.id)
    for i, n in enumerate(nodes):
        members = pools[(n.pool, n.namespace)]
        if not n.pool_shared and len(members) > 1:
            raise SpecError(f"{f}: nodes[{i}].pool_shared=false: {n.id!r} subscribes pool "
                            f"{n.pool!r} itself, so every request to it would reach each of "
                            f"its members {members}: expected it the pool's only member")
    if not any(n.role is Role.ORCHESTRATOR for n in nodes):
        raise SpecError(f"{f}: nodes: at least one node needs role = \"orchestrator\"")
    if directory == "global" and len(nodes) > MAX_NODES_GLOBAL_DIRECTORY:
        raise SpecError(f"{f}: directory=\"global\" with {len(nodes):,} nodes: a global "
                        f"directory sends N² = {len(nodes) ** 2:,} announcements as the mesh "
                        f"starts; at most {MAX_NODES_GLOBAL_DIRECTORY:,} nodes share one "
                        "(directory = \"namespace\" scopes it by namespace)")
    return Topology(top.text("name", path.stem), tuple(nodes), model, link, f, directory, version,
                    protocol=spoken.name, **settings)


def _mqtt_version(t: _Table, default: str) -> MqttVersion:
    """The `mqtt` key: "3.1.1" or "5" (a bare 5 is taken too)."""
    value = t.raw.get("mqtt", default)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if value not in tuple(v.value for v in MqttVersion):
        raise SpecError(f"{t.key('mqtt')}={value!r}: expected \"3.1.1\" or \"5\" (the MQTT "
                        "version the run's clients speak)")
    return MqttVersion(value)


# -- scenarios ---------------------------------------------------------------------------------

def _humans(raw: Any, where: str) -> tuple[tuple[str, float], ...]:
    from bench.workload import HUMAN_KINDS
    if not isinstance(raw, dict) or not raw:
        raise SpecError(f"{where}={raw!r} must be a table of kind = weight, kinds from "
                        f"{list(HUMAN_KINDS)} (e.g. {{ fast = 0.7, double_click = 0.3 }})")
    out = []
    for kind, weight in raw.items():
        if kind not in HUMAN_KINDS:
            raise SpecError(f"{where}.{kind}: unknown kind of human (known: {list(HUMAN_KINDS)})")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise SpecError(f"{where}.{kind}={weight!r} must be a number >= 0")
        out.append((kind, float(weight)))
    if sum(w for _k, w in out) <= 0:
        raise SpecError(f"{where}: the weights must add up to more than 0")
    return tuple(out)


def load_scenario(path: Path, *, topology: str | None = None, seed: int | None = None,
                  known_checks: Mapping[str, frozenset[str]] | None = None,
                  mqtt: str | None = None) -> Scenario:
    """The scenario at `path` (its topology `topology` if given), or SpecError naming the
    file and the key. `known_checks`: the checkers an [expect] may name — each with the
    protocols whose runs it judges (`bench.checks.judging()`), so that a checker that never
    judges this topology's runs is refused, not expected of a run that cannot give it."""
    f = _display(path)
    raw = read_toml(path)
    top = _Table(raw, f + ": ", {"name", "description", "topology", "mode", "seed", "duration_s",
                                 "drain_s", "auth", "workload", "faults", "expect",
                                 "sim_only", "unmodelled", "live_nodes", "mqtt",
                                 "session_expiry_s"})
    topo_name = topology or top.text("topology")
    try:
        topo_path = find(topo_name, TOPOLOGIES, "topology")
    except SpecError as exc:
        raise SpecError(f"{f}: topology={topo_name!r}: {exc}") from None
    if not topo_path.exists() and not topo_path.is_absolute():
        alt = path.parent / topo_path
        topo_path = alt if alt.exists() else topo_path
    topo = load_topology(topo_path)
    spoken = protocol(topo.protocol)
    if "auth" in raw and not spoken.envelope_auth:
        signing = [p.title for p in protocols().values() if p.envelope_auth]
        raise SpecError(f"{f}: auth: topology {topo.name!r} speaks {spoken.title}, whose "
                        f"nodes sign and check no envelopes: [auth] sets the signatures of "
                        f"{' and '.join(signing)} (remove the table)")
    auth_t = _Table(raw.get("auth", {}), f"{f}: auth",
                    {"mode", "signature", "keys", "signature_by_node"})
    by_node_raw = auth_t.raw.get("signature_by_node", {})
    node_ids = {n.id for n in topo.nodes}
    if not isinstance(by_node_raw, dict) or any(
            k not in node_ids or v not in (1, 2) or isinstance(v, bool) for k, v in by_node_raw.items()):
        raise SpecError(f"{auth_t.key('signature_by_node')}={by_node_raw!r} must be a table of "
                        f"node id = 1 or 2, nodes of topology {topo.name!r}: {sorted(node_ids)[:8]}")
    auth = AuthSpec(AuthMode(auth_t.choice("mode", tuple(m.value for m in AuthMode), "loose")),
                    SignatureVersion(str(int(auth_t.number("signature", 1, low=1, high=2)))),
                    auth_t.choice("keys", ("none", "flat", "per-agent"), "none"),
                    tuple((k, SignatureVersion(str(v))) for k, v in sorted(by_node_raw.items())))
    if auth.keys == "none" and (auth.signature is not SignatureVersion.V1
                                or auth.signature_by_node):
        # with no keys nothing is signed: the version names a signature no envelope carries
        given = "signature_by_node" if auth.signature_by_node else "signature"
        raise SpecError(f"{auth_t.key(given)}: envelopes are signed only with keys, and "
                        "auth.keys is \"none\" (\"flat\" or \"per-agent\" signs them)")
    w = _Table(raw.get("workload", {}), f"{f}: workload",
               {"rate_per_s", "task_duration_ms", "task_failure_rate", "request_timeout_ms",
                "hang_fraction", "task_timeout_ms",
                "conversations", "group_event_rate_per_s", "unknown_agent_fraction",
                "misaddressed_fraction", "explicit_target_fraction", "no_conversation_fraction",
                "pool_fraction", "streaming_fraction", "get_fraction", "cancel_fraction",
                "follow_up_ms", "multi_turn_fraction", "stream_events",
                "thinking_fraction", "tabs_per_conversation", "watched_fraction", "tab_churn",
                "process_fraction", "gate_fraction", "parallel_branches", "subflow_fraction",
                "step_duration_ms", "step_failure_rate", "step_retries", "humans",
                "reject_fraction", "gate_timeout_ms", "gate_on_timeout"})
    workload = WorkloadSpec(
        rate_per_s=w.number("rate_per_s", 2.0),
        task_duration_ms=parse_distribution(w.raw.get("task_duration_ms", 50), w.key("task_duration_ms")),
        task_failure_rate=w.number("task_failure_rate", 0.0, high=1.0),
        request_timeout_ms=int(w.number("request_timeout_ms", 30_000, low=1)),
        hang_fraction=w.number("hang_fraction", 0.0, high=1.0),
        task_timeout_ms=w.integer("task_timeout_ms", 60_000, low=1),
        conversations=w.integer("conversations", 4, low=1),
        group_event_rate_per_s=w.number("group_event_rate_per_s", 0.0),
        unknown_agent_fraction=w.number("unknown_agent_fraction", 0.0, high=1.0),
        misaddressed_fraction=w.number("misaddressed_fraction", 0.0, high=1.0),
        explicit_target_fraction=w.number("explicit_target_fraction", 0.0, high=1.0),
        pool_fraction=w.number("pool_fraction", 0.0, high=1.0),
        streaming_fraction=w.number("streaming_fraction", 0.0, high=1.0),
        get_fraction=w.number("get_fraction", 0.0, high=1.0),
        cancel_fraction=w.number("cancel_fraction", 0.0, high=1.0),
        follow_up_ms=w.number("follow_up_ms", 1_000.0, low=1.0),
        multi_turn_fraction=w.number("multi_turn_fraction", 0.0, high=1.0),
        no_conversation_fraction=w.number("no_conversation_fraction", 0.0, high=1.0),
        stream_events=w.integer("stream_events", 0),
        thinking_fraction=w.number("thinking_fraction", 0.0, high=1.0),
        tabs_per_conversation=w.integer("tabs_per_conversation", 0),
        watched_fraction=w.number("watched_fraction", 1.0, high=1.0),
        tab_churn=w.boolean("tab_churn", False),
        process_fraction=w.number("process_fraction", 0.0, high=1.0),
        gate_fraction=w.number("gate_fraction", 0.0, high=1.0),
        parallel_branches=w.integer("parallel_branches", 0),
        subflow_fraction=w.number("subflow_fraction", 0.0, high=1.0),
        step_duration_ms=parse_distribution(w.raw.get("step_duration_ms", 100),
                                            w.key("step_duration_ms")),
        step_failure_rate=w.number("step_failure_rate", 0.0, high=1.0),
        step_retries=w.integer("step_retries", 2),
        humans=_humans(w.raw.get("humans", {"fast": 1.0}), w.key("humans")),
        reject_fraction=w.number("reject_fraction", 0.0, high=1.0),
        gate_timeout_ms=int(w.number("gate_timeout_ms", 20_000, low=1)),
        gate_on_timeout=w.choice("gate_on_timeout", ("reject", "fail"), "reject"))
    unset = WorkloadSpec()
    for key in sorted(k for p in protocols().values() for k in p.workload_keys):
        # set (to other than its default) on a topology whose nodes do not do it
        if getattr(workload, key) != getattr(unset, key) and key not in spoken.workload_keys:
            owners = " and ".join(p.title for p in owners_of_workload_key(key))
            raise SpecError(f"{w.key(key)}={getattr(workload, key)!r}: a workload of "
                            f"{owners}; topology {topo.name!r} speaks {spoken.title}")
    for key in idle_keys(lambda k: getattr(workload, k)):
        if getattr(workload, key) != getattr(unset, key):
            raise SpecError(f"{w.key(key)}={w.raw[key]!r} changes nothing: it is read only "
                            f"with {NEEDS[key][0]}, which this workload does not have")
    if workload.group_event_rate_per_s > 0 and not any(n.scene_groups for n in topo.orchestrators):
        # `plan` sends an orchestrator's events to its own scene groups: none, none sent
        raise SpecError(f"{w.key('group_event_rate_per_s')}="
                        f"{workload.group_event_rate_per_s:g} changes nothing: no orchestrator "
                        f"of topology {topo.name!r} has scene_groups to send events to")
    if workload.pool_fraction > 0 and not any(n.pool for n in topo.nodes):
        # `plan` sends a request to the pool its agent's node serves: none, none sent
        raise SpecError(f"{w.key('pool_fraction')}={workload.pool_fraction:g} changes nothing: "
                        f"no node of topology {topo.name!r} serves a pool (a node's `pool`)")
    if workload.get_fraction + workload.cancel_fraction > 1.0:
        raise SpecError(f"{f}: workload: get_fraction + cancel_fraction must be at most 1")
    if workload.unknown_agent_fraction + workload.misaddressed_fraction \
            + workload.explicit_target_fraction > 1.0:
        raise SpecError(f"{f}: workload: unknown_agent_fraction + misaddressed_fraction + "
                        "explicit_target_fraction must not exceed 1")
    faults_raw = raw.get("faults", [])
    if not isinstance(faults_raw, list):
        raise SpecError(f"{f}: faults must be an array of tables ([[faults]])")
    faults = tuple(parse_fault(x, i, f"{f}: faults[{i}]", topo) for i, x in enumerate(faults_raw))
    duration_s = top.number("duration_s", 30, strict_low=True)
    orchestrators = sum(n.role is Role.ORCHESTRATOR for n in topo.nodes)
    planned = (workload.rate_per_s + workload.group_event_rate_per_s) * duration_s * orchestrators
    if planned > MAX_PLANNED_REQUESTS:
        raise SpecError(f"{f}: workload.rate_per_s={workload.rate_per_s:g} for "
                        f"duration_s={duration_s:g} on {orchestrators} orchestrator(s) plans "
                        f"{planned:,.0f} requests and events, more than the "
                        f"{MAX_PLANNED_REQUESTS:,} one run can record and judge on one machine")
    for spec in faults:
        if spec.at_ms >= duration_s * 1000:
            raise SpecError(f"{f}: faults[{spec.index}].at_s={spec.at_ms / 1000:g} must be "
                            f"< duration_s={duration_s:g}")
        need = CATALOGUE[spec.kind].keys(spec.params)
        if need is not None and auth.keys not in need[1]:
            how = f" how={spec.params['how']!r}" if "how" in spec.params else ""
            raise SpecError(f"{f}: faults[{spec.index}].kind={spec.kind!r}{how} {need[0]}: it "
                            f"acts only with auth.keys = {' or '.join(map(repr, need[1]))}, "
                            f"and this scenario's is {auth.keys!r}")
    raw_expect = raw.get("expect", {})
    by_broker_raw = {b: raw_expect[b] for b in BROKERS_BY_NAME
                     if isinstance(raw_expect, Mapping) and b in raw_expect}
    checks = set(known_checks or ()) or set(raw_expect) - set(by_broker_raw) | {
        k for t in by_broker_raw.values() if isinstance(t, Mapping) for k in t}
    expect_t = _Table({k: v for k, v in raw_expect.items() if k not in by_broker_raw}
                      if isinstance(raw_expect, Mapping) else raw_expect,
                      f"{f}: expect", checks | set(BROKERS_BY_NAME))
    # checkers whose subject this workload or topology does not ask for: UNKNOWN expected
    # (its protocol says which of its checkers are so; another protocol's judge nothing here)
    spoken = protocol(topo.protocol)
    expect = {k: "unknown" for k, asks in spoken.optional_subjects.items()
              if not asks(workload, topo)}
    expect |= {k: expect_t.choice(k, VERDICT_WORDS, "true") for k in expect_t.raw}
    by_broker = {}
    for b, table in by_broker_raw.items():
        t = _Table(table, f"{f}: expect.{b}", checks)
        by_broker[b] = {k: t.choice(k, VERDICT_WORDS, "true") for k in t.raw}
    gaps_t = _Table(raw.get("unmodelled", {}), f"{f}: unmodelled", set(BROKERS_BY_NAME))
    unmodelled = {}
    for b in gaps_t.raw:
        if b not in BEHAVIOURS:       # a gap is a simulation's: of a broker it has a model of
            raise SpecError(f"{f}: unmodelled.{b}: the simulator has no model of {b} (it "
                            f"models {', '.join(m for m in BEHAVIOURS if m != 'generic')}), "
                            "so no simulation of it has a gap to declare")
        t = _Table(gaps_t.raw[b], f"{f}: unmodelled.{b}", checks)
        unmodelled[b] = {k: t.text(k) for k in t.raw}
    for table, b in [*((f"expect.{b}", b) for b in by_broker),
                     *((f"unmodelled.{b}", b) for b in unmodelled)]:
        row = BEHAVIOURS.get(b)     # (a live broker's versions are its substrate's to know)
        if topology is None and row is not None and row.v5 is None \
                and MqttVersion.V311 not in spoken.mqtt_versions:
            # no run of this scenario is on that broker: its expectation is never read (on a
            # topology given from outside, one written for its own does not apply)
            raise SpecError(f"{f}: {table}: {b} speaks MQTT 3.1.1 only, and topology "
                            f"{topo.name!r} speaks {spoken.title}, MQTT 5 alone: no run of "
                            f"it is on {b}")
    judges = known_checks or {}
    for table, named in (("expect", expect_t.raw), *((f"expect.{b}", v) for b, v in
                                                     by_broker.items()),
                         *((f"unmodelled.{b}", v) for b, v in unmodelled.items())):
        for k in named:
            if k in judges and topo.protocol not in judges[k]:
                # expected of a run it never judges, the verdict is never there to differ
                raise SpecError(f"{f}: {table}.{k}: {k} judges runs of "
                                f"{' and '.join(sorted(protocol(p).title for p in judges[k]))}; "
                                f"topology {topo.name!r} speaks {spoken.title}")
    drain_default = workload.request_timeout_ms / 1000 + 5
    mode = Mode(top.choice("mode", MODES, DEFAULT_MODE))
    version = MqttVersion(mqtt) if mqtt is not None else _mqtt_version(top, topo.mqtt.value)
    if version not in protocol(topo.protocol).mqtt_versions:
        raise SpecError(f"{top.key('mqtt') if mqtt is None else '--mqtt'}={version.value!r}: "
                        f"topology {topo.name!r}: {protocol(topo.protocol).mqtt_why}")
    ask = "--mqtt 5" if mqtt is not None else 'mqtt = "5"'   # how this run would speak 5
    for spec in faults:
        if CATALOGUE[spec.kind].mqtt5 and version is not MqttVersion.V5:
            raise SpecError(f"{f}: faults[{spec.index}].kind={spec.kind!r} acts on what MQTT 5 "
                            f"alone has, and this run speaks {version.value} ({ask} asks for 5)")
    if "session_expiry_s" in raw and version is not MqttVersion.V5:
        # MQTT 3.1.1 has no Session Expiry Interval: its clean session is kept for ever
        raise SpecError(f"{top.key('session_expiry_s')}={raw['session_expiry_s']!r}: the "
                        f"Session Expiry Interval is MQTT 5's, and this run speaks "
                        f"{version.value} ({ask} asks for 5)")
    return Scenario(
        name=top.text("name", path.stem), description=str(raw.get("description", "")),
        topology=topo, mode=mode, seed=seed if seed is not None else top.integer("seed", 1),
        duration_ms=duration_s * 1000, drain_ms=top.number("drain_s", drain_default) * 1000,
        auth=auth, workload=workload, faults=faults, expect=expect, source=f,
        sim_only=top.text("sim_only") if "sim_only" in raw else None,
        expect_by_broker=by_broker, unmodelled=unmodelled,
        live_nodes=top.choice("live_nodes", ("inproc", "process"), "inproc")
        if "live_nodes" in raw else None,
        mqtt=version,
        session_expiry_s=top.integer("session_expiry_s", CLIENT.session_expiry_s))
