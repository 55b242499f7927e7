"""The fault primitives: the small, substrate-neutral actions every fault script is made of.

A substrate either carries a primitive out (`Done`, with what it observed) or refuses it
explicitly (`Refused`, with the reason: the runner journals it and the verdicts that
needed the fault become UNKNOWN). Nothing here knows simpy, asyncio or sockets; what a
primitive means on a substrate lives in that substrate's deployment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.core.auth import KeyRing
from bench.core.config import NodeConfig
from bench.core.properties import Props
from bench.spec.distribution import Distribution


@dataclass(frozen=True, slots=True)
class FaultRef:
    """Which fault of the scenario a primitive acts for: firings are journaled under it."""

    index: int
    kind: str


#: (topic, payload) -> the payload to deliver instead, or None to leave it as it was.
Rewrite = Callable[[str, bytes], "bytes | None"]
#: (topic, payload) of a PUBLISH the broker accepted.
Tap = Callable[[str, bytes], None]


# -- nodes ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Crash:
    """Kill the node's process: memory, timers, connections gone; its store keeps what was
    committed (sim: the memory store's crash model; live: SIGKILL or the node object).
    `graceful`: stop it as an operator does instead (SIGTERM): the node is told it is
    stopping, what it handled is committed, what it says then goes out, and each
    connection ends with a DISCONNECT (the broker publishes no will)."""

    fault: FaultRef
    node: str
    graceful: bool = False


@dataclass(frozen=True, slots=True)
class Boot:
    """Start the node again from its data, with `config` if given (its new roster,
    namespace or keys), else as it last ran."""

    fault: FaultRef
    node: str
    config: NodeConfig | None = None


@dataclass(frozen=True, slots=True)
class WipeRoster:
    """Delete the node's persisted roster (the node is down): it boots with none."""

    fault: FaultRef
    node: str


@dataclass(frozen=True, slots=True)
class SkewClock:
    """The node's clock runs `skew_ms` off (0: correct again)."""

    fault: FaultRef
    node: str
    skew_ms: float


@dataclass(frozen=True, slots=True)
class RotateKeys:
    """The node gets a new keyring (and keeps it across restarts)."""

    fault: FaultRef
    node: str
    keys: KeyRing


# -- the node's MQTT client ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SecondConnection:
    """A second MQTT connection in the node subscribes to its inbox and groups (on), or is
    closed (off). Every message it receives is a firing, journaled by the node's host.
    `overlapping`: instead, the node's own connection also subscribes to a filter that
    overlaps its inbox (one client, two matching filters: the seeds' A9 shape), removed
    at the heal; whether a message then arrives once or twice is the broker's choice."""

    fault: FaultRef
    node: str
    on: bool
    overlapping: bool = False


@dataclass(frozen=True, slots=True)
class UseClientId:
    """The node reconnects under `client_id` (another node's: a session takeover), or under
    its own again (None). Connecting under another's id is a firing."""

    fault: FaultRef
    node: str
    client_id: str | None


@dataclass(frozen=True, slots=True)
class StripReplyNode:
    """The node's own bug: a share of its TASK_REQUESTs leave without headers.replyNodeId
    (signed as sent). `probability` 0 switches it off; each stripped request is a firing."""

    fault: FaultRef
    node: str
    probability: float
    seed: int


@dataclass(frozen=True, slots=True)
class FailPublishes:
    """The node's MQTT client refuses a share of its publishes (a full send queue, a payload
    over the broker's limit): each refused message is reported to the core as failed.
    `probability` 0 switches it off; each refusal is a firing."""

    fault: FaultRef
    node: str
    probability: float
    seed: int


# -- the broker -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BrokerStop:
    """The broker goes down: `graceful` lets it save state (SIGTERM), else it is killed;
    `persistence` says whether a simulated broker keeps sessions and retained messages."""

    fault: FaultRef
    graceful: bool
    persistence: bool


@dataclass(frozen=True, slots=True)
class BrokerStart:
    fault: FaultRef


@dataclass(frozen=True, slots=True)
class Redeliver:
    """Deliveries (to `node`, or to every node) are delivered again after `delay_ms`, with
    the given probability — a broker's (delayed) QoS1 redelivery as the receiver sees it.
    `probability` 0 stops it (redeliveries already due still happen)."""

    fault: FaultRef
    node: str | None
    probability: float
    delay_ms: Distribution | None
    seed: int


# -- the node's link to the broker ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LinkDown:
    """Blackhole the nodes' links (a partition): nothing passes, connections die when a
    keepalive notices; `LinkUp` heals and reports what was lost. `unplug`: the interface
    is gone too, so a new connection fails at once instead of hanging. `direction`: the
    way packets vanish ("both"; "to_broker", the node's; "from_broker", the broker's)."""

    fault: FaultRef
    nodes: tuple[str, ...]
    unplug: bool = False
    direction: str = "both"


#: the ways packets go: "up", the node's to the broker; "down", the broker's to the node
BOTH_WAYS = frozenset({"up", "down"})
#: a partition's `direction` -> the ways it cuts
BLOCKS = {"both": BOTH_WAYS, "to_broker": frozenset({"up"}), "from_broker": frozenset({"down"})}


@dataclass(frozen=True, slots=True)
class LinkUp:
    fault: FaultRef
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LinkLatency:
    """The nodes' links take `latency_ms` per packet (None: back to normal)."""

    fault: FaultRef
    nodes: tuple[str, ...]
    latency_ms: Distribution | None


@dataclass(frozen=True, slots=True)
class LinkLoss:
    """The nodes' links lose packets with `probability`; TCP retransmits them late."""

    fault: FaultRef
    nodes: tuple[str, ...]
    probability: float


@dataclass(frozen=True, slots=True)
class Freeze:
    """The node's process is frozen (on): alive, its connections open, handling nothing and
    sending nothing — a gray failure; off thaws it and it goes on where it stopped."""

    fault: FaultRef
    node: str
    on: bool


@dataclass(frozen=True, slots=True)
class WithholdPuback:
    """The node's PUBACKs never reach the broker (on); off lets them pass again and cuts
    the node's connection, so the broker must redeliver what it never saw acknowledged."""

    fault: FaultRef
    node: str
    on: bool


@dataclass(frozen=True, slots=True)
class DuplicatePublish:
    """A share of the PUBLISH packets to the node arrive twice, same packet id (0: off)."""

    fault: FaultRef
    node: str
    probability: float
    seed: int


@dataclass(frozen=True, slots=True)
class RefusePublishes:
    """MQTT 5: a share of the node's QoS1 PUBLISHes is refused on its link as a broker
    refuses one (quota, authorisation): not routed, and acknowledged with a PUBACK whose
    reason code is `reason_code` (0x80 and above; probability 0: off)."""

    fault: FaultRef
    node: str
    probability: float
    reason_code: int
    seed: int


@dataclass(frozen=True, slots=True)
class TamperProperties:
    """MQTT 5: a share of the node's PUBLISHes has one property stripped or altered on its
    link, on the way to the broker (`Props.tampered`): `prop` one of TAMPERABLE, `key` the
    User Property's name (probability 0: off)."""

    fault: FaultRef
    node: str
    probability: float
    prop: str
    strip: bool
    key: str
    seed: int
    #: a User Property `key` the PUBLISH lacks is added (action = "add")
    add: bool = False

    def fired(self, count: int) -> Firing | None:
        """What the fault journals when it is turned off: how many it tampered with."""
        if not count:
            return None
        how = "stripped" if self.strip else "added or altered" if self.add else "altered"
        return Firing(f"PUBLISH {self.prop} {how}",
                      self.node, {"count": count, "property": self.prop})


class Tampering:
    """One property_tampering fault acting on a link: its draw and its count (the simulated
    host and the live proxy each keep one per fault, so two on one node do not mix)."""

    def __init__(self, step: TamperProperties, rng: Any) -> None:
        self.step = step
        self.rng = rng
        self.count = 0

    def act(self, props: Props) -> Props | None:
        """`props` tampered with, if drawn and if it has the property; else None."""
        s = self.step
        if self.rng.random() >= s.probability:
            return None
        new = props.tampered(s.prop, s.strip, s.key, s.add)
        if new is not None:
            self.count += 1
        return new


@dataclass(frozen=True, slots=True)
class Intercept:
    """A man in the middle on the node's link rewrites what reaches the node (None: gone).
    The rewrite journals its own attacks."""

    fault: FaultRef
    node: str
    rewrite: Rewrite | None


# -- an attacker: a client of the broker ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Inject:
    """The attacker publishes `payload` to `topic` (QoS1; retained if `retain`: an empty
    retained payload clears what the broker retained there)."""

    fault: FaultRef
    topic: str
    payload: bytes
    retain: bool = False
    props: Props | None = None      # MQTT 5 PUBLISH properties (a v5 run's)


@dataclass(frozen=True, slots=True)
class Capture:
    """The attacker sees every PUBLISH to a node's inbox (`tap`), or stops (None)."""

    fault: FaultRef
    tap: Tap | None


Primitive = (Crash | Boot | WipeRoster | SkewClock | RotateKeys | SecondConnection | UseClientId
             | StripReplyNode | FailPublishes | BrokerStop | BrokerStart | Redeliver | LinkDown
             | LinkUp | LinkLatency | LinkLoss | WithholdPuback | DuplicatePublish | Intercept
             | Inject | Capture | Freeze | RefusePublishes | TamperProperties)


@dataclass(frozen=True, slots=True)
class Firing:
    """The primitive took effect: journaled as `fault_fired` on `node`."""

    action: str
    node: str = "nemesis"
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Crashed:
    """What a Crash did: how the process died, and how many store writes it lost (known
    in simulation, where the store's crash model counts them; not live)."""

    how: str
    lost_writes: int | None = None


@dataclass(frozen=True, slots=True)
class Done:
    """Carried out. `firings` are what it did (none: it only armed something, or found
    nothing to act on)."""

    firings: tuple[Firing, ...] = ()
    crashed: Crashed | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """This substrate cannot do it here; `reason` says why (journaled, never silent)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Broke:
    """Carrying it out threw: it may or may not have happened (INFO, never a refusal)."""

    error: str
    where: str = ""


Outcome = Done | Refused | Broke
