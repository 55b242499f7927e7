"""What a deployment looks like: nodes (role, namespace, agents, scene groups), the broker
model, and the link model of each node. A description only — drivers decide what to do
with it; `bench.spec.scenario` loads it from TOML."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bench.spec.distribution import Distribution, fixed


class Role(StrEnum):
    ORCHESTRATOR = "orchestrator"
    EXECUTOR = "executor"


class MqttVersion(StrEnum):
    """The MQTT protocol version a run speaks: every node's client and the bench's own (its
    watch, probes, attackers). 3.1.1 is the seed protocol's; 5 is what the A2A-over-MQTT
    profile requires (Response Topic, Correlation Data, User Properties, shared
    subscriptions, sessions by expiry)."""

    V311 = "3.1.1"
    V5 = "5"


class BrokerModel(StrEnum):
    """Whose semantics the simulated broker copies where brokers differ (DESIGN §10): a
    row of `bench.spec.brokers.BEHAVIOURS`. A live run on a generic topology uses the
    embedded broker (amqtt) unless told otherwise."""

    GENERIC = "generic"      # MQTT 3.1.1 as written
    AMQTT = "amqtt"          # the embedded amqtt, quirks and all
    MOSQUITTO = "mosquitto"  # Mosquitto 2.0

    @property
    def live_default(self) -> str:
        """The broker a live run starts for this model (MQTT 3.1.1)."""
        return "amqtt" if self is BrokerModel.GENERIC else self.value

    def live_default_for(self, version: MqttVersion) -> str:
        """The broker a live run on `version` starts: amqtt speaks 3.1.1 only, so a generic
        topology on MQTT 5 gets Mosquitto."""
        if version is MqttVersion.V5 and self is BrokerModel.GENERIC:
            return "mosquitto"
        return self.live_default


@dataclass(frozen=True, slots=True)
class LinkSpec:
    latency_ms: Distribution = fixed(1.0)
    loss: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"latency_ms": self.latency_ms.to_json(), "loss": self.loss}


@dataclass(frozen=True, slots=True)
class NodeSpec:
    id: str
    role: Role
    namespace: str
    agents: tuple[str, ...] = ()
    scene_groups: tuple[str, ...] = ()
    client_id: str = ""
    link: LinkSpec | None = None
    #: the command that starts this node as a process speaking the node-process protocol
    #: (docs/PROTOCOL.md, part 2); empty: the reference node
    command: tuple[str, ...] = ()
    #: --mode docker: the image whose container is this node (its own entrypoint speaks
    #: the node-process protocol on the attached stdin/stdout); None: the reference
    image: str | None = None
    #: A2A over MQTT: the shared-subscription pool this responder also serves
    pool: str | None = None
    #: A2A over MQTT: the responder (a node id) this card owner hands every new task over
    #: to (user story 07); that node serves only what it is handed
    hands_over_to: str | None = None
    #: A2A over MQTT: false — this responder, its pool's only member, subscribes the pool's
    #: topic itself, not through a shared subscription (the profile's MAY: a broker that
    #: serves no shared subscription on $a2a/..., Mosquitto 2.0.11, still has a pool)
    pool_shared: bool = True
    #: A2A over MQTT: the tasks this responder runs at once; a new one beyond them is
    #: refused -32004 responder_unavailable (None: no bound)
    capacity: int | None = None

    @property
    def external(self) -> bool:
        """Anyone's node, not the reference: the bench plays its agents and taps its wire."""
        return bool(self.command or self.image)

    @property
    def requester_agent(self) -> str:
        return self.agents[0] if self.agents else f"{self.namespace}.orchestrator"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "role": self.role.value, "namespace": self.namespace,
                "agents": list(self.agents), "scene_groups": list(self.scene_groups),
                "client_id": self.client_id or None,
                "link": self.link.to_json() if self.link else None,
                **({"command": list(self.command)} if self.command else {}),
                **({"image": self.image} if self.image else {}),
                **({"pool": self.pool} if self.pool else {}),
                **({"hands_over_to": self.hands_over_to} if self.hands_over_to else {}),
                **({} if self.pool_shared else {"pool_shared": False}),
                **({"capacity": self.capacity} if self.capacity is not None else {})}


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    nodes: tuple[NodeSpec, ...]
    broker: BrokerModel = BrokerModel.GENERIC
    link: LinkSpec = field(default_factory=LinkSpec)
    source: str = ""
    #: who reads whose announcements: "global" (every node every node's: N² messages as a
    #: mesh starts) or "namespace" (an executor its own namespace's, an orchestrator every
    #: namespace it delegates to)
    directory: str = "global"
    #: the MQTT version its clients speak unless a scenario or --mqtt says otherwise
    mqtt: MqttVersion = MqttVersion.V311
    #: the protocol its nodes speak (`protocol = ...`: a package of bench/protocols/)
    protocol: str = "seed"
    #: its protocol's own settings: its topology table, as the protocol's `settings` module
    #: read it, under the table's name (JSON: `{"a2a": {"org": ...}}`); None: none
    settings: Mapping[str, Any] | None = None
    #: the bench offers the nodes TLS to the broker (terminated at each node's wire tap,
    #: with the run's own certificate authority), where its protocol's settings ask for it
    node_tls: bool = False

    @property
    def delegates(self) -> frozenset[str]:
        """The nodes that serve only the tasks another hands over to them: no requester is
        sent to them."""
        return frozenset(n.hands_over_to for n in self.nodes if n.hands_over_to)

    def table(self, section: str) -> dict[str, Any]:
        """Its protocol's table `section` as the topology keeps it (JSON; {}: none)."""
        return dict((self.settings or {}).get(section) or {})

    def node(self, node_id: str) -> NodeSpec:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"topology {self.name}: no node {node_id!r}")

    def directory_scope(self, node: NodeSpec) -> tuple[str, ...]:
        """The namespaces whose directory `node` reads (empty: all, on one level)."""
        if self.directory == "global":
            return ()
        if node.role is Role.ORCHESTRATOR:
            others = sorted({n.namespace for n in self.nodes} - {node.namespace})
            return (node.namespace, *others)
        return (node.namespace,)

    def link_of(self, node: NodeSpec) -> LinkSpec:
        return node.link or self.link

    @property
    def orchestrators(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.role is Role.ORCHESTRATOR)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source,
                "broker": {"model": self.broker.value,
                           **({"mqtt": self.mqtt.value} if self.mqtt is not MqttVersion.V311
                              else {})},
                **({"protocol": self.protocol} if self.protocol != "seed" else {}),
                "link": self.link.to_json(), "nodes": [n.to_json() for n in self.nodes],
                **({"directory": self.directory} if self.directory != "global" else {}),
                **(dict(self.settings) if self.settings else {})}
