"""What each fault of the catalogue does, once for every substrate: a script of primitives.

A script is a generator. It yields a primitive (the runner has the deployment carry it out
and sends back the `Outcome`), `Wait(ms)`, or `HEAL` (wait for the end of the fault's
window). A refused primitive ends the script; the runner journals why. Scripts never
touch a substrate: what they need to know (a node's configuration, when it booted, the
clock) they ask their `Context`; what they observe outside a step (a tampered message,
a captured request) they journal through it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Protocol

from bench.core.auth import Secret
from bench.core.config import NodeConfig
from bench.core.envelope import Envelope, MessageType, decode
from bench.core.events import AttackSent
from bench.core.topics import TopicKind
from bench.faults import envelope_attacks
from bench.faults.attacks import (
    HOSTILE_WHAT,
    AttackMessage,
    forged_request,
    hostile_request,
    predicted_forgery,
    replayed,
    rotated,
    tampered,
    victim_and_targets,
)
from bench.faults.primitives import (
    Boot,
    BrokerStart,
    BrokerStop,
    Capture,
    Crash,
    Done,
    DuplicatePublish,
    FailPublishes,
    FaultRef,
    Firing,
    Freeze,
    Inject,
    Intercept,
    LinkDown,
    LinkLatency,
    LinkLoss,
    LinkUp,
    Outcome,
    Primitive,
    Redeliver,
    RefusePublishes,
    RotateKeys,
    SecondConnection,
    SkewClock,
    StripReplyNode,
    TamperProperties,
    UseClientId,
    WipeRoster,
    WithholdPuback,
)
from bench.faults.spec import FaultSpec
from bench.spec.distribution import rng_for
from bench.spec.topology import Topology


@dataclass(frozen=True, slots=True)
class Wait:
    delay_ms: float


class _Heal:
    def __repr__(self) -> str:
        return "HEAL"


#: Wait for the end of the fault's window (its heal step follows).
HEAL = _Heal()

@dataclass(frozen=True, slots=True)
class Refuse:
    """The fault cannot act in this scenario (the script's own judgement, journaled)."""

    reason: str


Step = Primitive | Wait | _Heal | Refuse
Script = Generator[Step, Outcome, None]


class Context(Protocol):
    """What a script may ask of the run it acts in."""

    seed: int
    topology: Topology
    end_ms: float            # the end of this fault's window
    jitter_ms: float         # how precisely the substrate hits a moment (sim 1 ms, live 50 ms)
    mqtt: str                # the MQTT version the run's clients speak ("3.1.1", "5")

    def now_ms(self) -> float: ...

    def wall_ms(self) -> int:
        """What the nodes' clocks read now (Unix ms, no skew)."""

    def config(self, node: str) -> NodeConfig: ...
    def booted_at_ms(self, node: str) -> float: ...
    def fired(self, firing: Firing) -> None: ...
    def attack_sent(self, event: AttackSent) -> None: ...
    def later(self, delay_ms: float, fn: Callable[[], None]) -> None: ...
    def act(self, step: Primitive, then: Callable[[Outcome], None] | None = None) -> None:
        """Carry out a primitive outside the script's own steps (from a tap or a timer);
        a refusal is journaled like any other."""


def _ref(spec: FaultSpec) -> FaultRef:
    return FaultRef(spec.index, spec.kind)


def _any_config(ctx: Context) -> NodeConfig:
    """The view an attacker on the broker has: the fleet's prefix, auth mode and keys."""
    return ctx.config(ctx.topology.nodes[0].id)


# -- nodes ------------------------------------------------------------------------------------
def restart(spec: FaultSpec, ctx: Context) -> Script:
    node = spec.params["node"]
    if spec.params["in_flush_window"]:
        interval = ctx.config(node).ledger.flush_interval_ms
        booted = ctx.booted_at_ms(node)
        since = ctx.now_ms() - booted
        next_flush = booted + (since // interval + 1) * interval
        yield Wait(max(0.0, next_flush - ctx.jitter_ms - ctx.now_ms()))
    yield from _restart(spec, node, None, graceful=spec.params["graceful"])


def _restart(spec: FaultSpec, node: str, config: NodeConfig | None,
             wipe_roster: bool = False, graceful: bool = False) -> Script:
    ref = _ref(spec)
    yield Crash(ref, node, graceful)
    if wipe_roster:
        yield WipeRoster(ref, node)
    yield Wait(spec.params["down_ms"])
    yield Boot(ref, node, config)


def empty_directory(spec: FaultSpec, ctx: Context) -> Script:
    node = spec.params["node"]
    original = ctx.config(node)
    yield from _restart(spec, node, replace(original, agents=()), wipe_roster=True)
    yield HEAL
    yield from _restart(spec, node, original)


def directory_wipe(spec: FaultSpec, ctx: Context) -> Script:
    node = spec.params["node"]
    topic = ctx.config(node).directory_topic
    yield Inject(_ref(spec), topic, b"", retain=True)
    ctx.fired(Firing("announcement cleared", node, {"topic": topic}))


def ghost_announcement(spec: FaultSpec, ctx: Context) -> Script:
    """A retained announcement of a node that is gone, offline yet listing the live node's
    agents (an older release's will kept them), under a node id that sorts after the live
    one's; cleared again when the fault heals (the end of the run, without a duration)."""
    node = spec.params["node"]
    config = ctx.config(node)
    ghost = spec.params["ghost"] or f"{node}~ghost"
    topic = f"{config.directory_topic.rsplit('/', 1)[0]}/{ghost}"
    body = {"nodeId": ghost, "online": False, "namespace": config.namespace,
            "agents": [{"agentId": a, "role": "executor"} for a in config.agents]}
    yield Inject(_ref(spec), topic, json.dumps(body).encode(), retain=True)
    ctx.fired(Firing("ghost announced", node, {"topic": topic, "ghost": ghost,
                                               "agents": list(config.agents)}))
    yield HEAL
    yield Inject(_ref(spec), topic, b"", retain=True)


def stale_roster(spec: FaultSpec, ctx: Context) -> Script:
    node = spec.params["node"]
    switched = replace(ctx.config(node), namespace=spec.params["namespace"],
                       agents=tuple(spec.params["agents"]))
    yield from _restart(spec, node, switched)


def clock_skew(spec: FaultSpec, ctx: Context) -> Script:
    node, skew = spec.params["node"], spec.params["skew_ms"]
    yield SkewClock(_ref(spec), node, skew)
    ctx.fired(Firing("clock set off", node, {"skewMs": skew}))
    yield HEAL
    yield SkewClock(_ref(spec), node, 0.0)


def key_rotation(spec: FaultSpec, ctx: Context) -> Script:
    agent, stale = spec.params["agent"], spec.params.get("stale_node")
    original = _any_config(ctx).auth.keys
    if agent not in original.agent_keys:
        yield Refuse(f"agent {agent!r} has no per-agent key (scenario auth.keys)")
        return
    new = Secret(rng_for(ctx.seed, f"fault/{spec.index}/key").randbytes(24).hex())
    current = [n.id for n in ctx.topology.nodes if n.id != stale]
    for node in current:
        yield RotateKeys(_ref(spec), node, rotated(original, agent, new, True))
    ctx.fired(Firing("key rotated", details={"agent": agent, "staleNode": stale,
                                             "overlapMs": spec.params["overlap_ms"]}))
    yield Wait(spec.params["overlap_ms"])
    for node in current:
        yield RotateKeys(_ref(spec), node, rotated(original, agent, new, False))
    ctx.fired(Firing("overlap ended", details={"agent": agent}))


# -- the node's MQTT client -----------------------------------------------------------------------
def double_subscription(spec: FaultSpec, ctx: Context) -> Script:
    overlapping = spec.params["form"] == "overlapping_filters"
    yield SecondConnection(_ref(spec), spec.params["node"], True, overlapping)
    yield HEAL
    yield SecondConnection(_ref(spec), spec.params["node"], False, overlapping)


def duplicate_client_id(spec: FaultSpec, ctx: Context) -> Script:
    stolen = ctx.config(spec.params["node"]).effective_client_id
    yield UseClientId(_ref(spec), spec.params["impostor"], stolen)
    yield HEAL
    yield UseClientId(_ref(spec), spec.params["impostor"], None)


def missing_reply_node(spec: FaultSpec, ctx: Context) -> Script:
    node = spec.params["node"]
    yield StripReplyNode(_ref(spec), node, spec.params["probability"], ctx.seed)
    yield HEAL
    yield StripReplyNode(_ref(spec), node, 0.0, ctx.seed)


def publish_failure(spec: FaultSpec, ctx: Context) -> Script:
    node = spec.params["node"]
    yield FailPublishes(_ref(spec), node, spec.params["probability"], ctx.seed)
    yield HEAL
    yield FailPublishes(_ref(spec), node, 0.0, ctx.seed)


def puback_refused(spec: FaultSpec, ctx: Context) -> Script:
    if ctx.mqtt != "5":
        yield Refuse(f"a PUBACK carries a reason code on MQTT 5 only, and the run speaks "
                     f"{ctx.mqtt} (mqtt = \"5\", or --mqtt 5)")
        return
    node, code = spec.params["node"], int(spec.params["reason_code"], 16)
    yield RefusePublishes(_ref(spec), node, spec.params["probability"], code, ctx.seed)
    yield HEAL
    yield RefusePublishes(_ref(spec), node, 0.0, code, ctx.seed)


def property_tampering(spec: FaultSpec, ctx: Context) -> Script:
    if ctx.mqtt != "5":
        yield Refuse(f"PUBLISH properties exist on MQTT 5 only, and the run speaks "
                     f"{ctx.mqtt} (mqtt = \"5\", or --mqtt 5)")
        return
    p = spec.params
    node, prop, strip, key = p["node"], p["property"], p["action"] == "strip", p["key"]
    add = p["action"] == "add"
    if add and prop != "user_property":
        yield Refuse(f"action = \"add\" adds a User Property (property = \"user_property\"), "
                     f"not {prop}")
        return
    yield TamperProperties(_ref(spec), node, p["probability"], prop, strip, key, ctx.seed, add)
    yield HEAL
    yield TamperProperties(_ref(spec), node, 0.0, prop, strip, key, ctx.seed, add)


# -- the broker and the links ----------------------------------------------------------------------
def broker_restart(spec: FaultSpec, ctx: Context) -> Script:
    yield BrokerStop(_ref(spec), spec.params["graceful"], spec.params["persistence"])
    yield Wait(spec.params["down_ms"])
    yield BrokerStart(_ref(spec))


def qos1_redelivery(spec: FaultSpec, ctx: Context) -> Script:
    ref, node, p = _ref(spec), spec.params.get("node"), spec.params["probability"]
    method = spec.params["method"]
    if method == "redeliver":
        yield Redeliver(ref, node, p, spec.params["delay_ms"], ctx.seed)
        yield HEAL
        yield Redeliver(ref, node, 0.0, None, ctx.seed)
        return
    if node is None:
        yield Refuse(f"method={method} acts on one node's link: give the fault a node")
        return
    if method == "withhold_puback":
        yield WithholdPuback(ref, node, True)
        yield HEAL
        yield WithholdPuback(ref, node, False)
    else:
        yield DuplicatePublish(ref, node, p, ctx.seed)
        yield HEAL
        yield DuplicatePublish(ref, node, 0.0, ctx.seed)


def pause(spec: FaultSpec, ctx: Context) -> Script:
    node = spec.params["node"]
    yield Freeze(_ref(spec), node, True)
    yield HEAL
    yield Freeze(_ref(spec), node, False)


def partition(spec: FaultSpec, ctx: Context) -> Script:
    nodes = tuple(spec.params["nodes"])
    yield LinkDown(_ref(spec), nodes, spec.params["how"] == "unplug",
                   spec.params.get("direction", "both"))
    yield HEAL
    yield LinkUp(_ref(spec), nodes)


def latency(spec: FaultSpec, ctx: Context) -> Script:
    nodes = tuple(spec.params["nodes"])
    yield LinkLatency(_ref(spec), nodes, spec.params["latency_ms"])
    yield HEAL
    yield LinkLatency(_ref(spec), nodes, None)


def loss(spec: FaultSpec, ctx: Context) -> Script:
    nodes = tuple(spec.params["nodes"])
    yield LinkLoss(_ref(spec), nodes, spec.params["probability"])
    yield HEAL
    yield LinkLoss(_ref(spec), nodes, 0.0)


# -- the attacker (bench.faults.attacks) ------------------------------------------------------------
def _inject(spec: FaultSpec, ctx: Context, msg: AttackMessage) -> Inject:
    """Journal first: the attack is in the history before it is on the wire."""
    ctx.attack_sent(msg.event)
    return Inject(_ref(spec), msg.topic, msg.payload)


def _attacked(ctx: Context, msg: AttackMessage) -> None:
    ctx.fired(Firing(msg.event.attack, details={"messageId": msg.event.message_id}))


def forged_sender(spec: FaultSpec, ctx: Context) -> Script:
    config = _any_config(ctx)
    auth = config.auth
    victim, victim_node, targets, compromised = victim_and_targets(
        [(n.id, n.role.value, n.agents) for n in ctx.topology.nodes])
    n = 0
    while ctx.now_ms() < ctx.end_ms:
        for node, agent in targets:
            n += 1
            claimed = agent if spec.params["claims"] == "target" else victim
            msg = forged_request(spec.params["how"], n, spec.index, victim_agent=claimed,
                                 victim_node=victim_node, target_node=node, target_agent=agent,
                                 keys=auth.keys, compromised=compromised,
                                 now_ms=ctx.wall_ms(), prefix=config.prefix,
                                 version=auth.version, max_skew_ms=auth.max_skew_ms)
            if msg is None:
                yield Refuse(f"the attacker holds no key for how={spec.params['how']!r} "
                              "(scenario auth.keys)")
                return
            yield _inject(spec, ctx, msg)
            _attacked(ctx, msg)
        yield Wait(spec.params["interval_ms"])


def ledger_poisoning(spec: FaultSpec, ctx: Context) -> Script:
    config = _any_config(ctx)
    victim, victim_node, targets, _ = victim_and_targets(
        [(n.id, n.role.value, n.agents) for n in ctx.topology.nodes])
    nodes = dict(reversed(targets))    # each executor node once, with its first agent
    k = 0
    while ctx.now_ms() < ctx.end_ms:
        for _ in range(int(spec.params["ahead"])):
            k += 1
            for node, agent in sorted(nodes.items()):
                msg = predicted_forgery(k, spec.index, victim_agent=victim,
                                        victim_node=victim_node, target_node=node,
                                        target_agent=agent, keys=config.auth.keys,
                                        now_ms=ctx.wall_ms(), prefix=config.prefix,
                                        max_skew_ms=config.auth.max_skew_ms)
                yield _inject(spec, ctx, msg)
                _attacked(ctx, msg)
        yield Wait(spec.params["interval_ms"])


def hostile_input(spec: FaultSpec, ctx: Context) -> Script:
    config = _any_config(ctx)
    auth = config.auth
    _, _, targets, insider = victim_and_targets(
        [(n.id, n.role.value, n.agents) for n in ctx.topology.nodes])
    home = next((node for node, agent in targets if agent == insider), None)
    if insider is None or home is None:
        yield Refuse("no executor agent to act as the insider")
        return
    victims = [(node, agent) for node, agent in targets if node != home]
    if not victims:
        yield Refuse(f"no executor other than the insider's node {home}")
        return
    n = 0
    while ctx.now_ms() < ctx.end_ms:
        node, agent = victims[n % len(victims)]
        what = HOSTILE_WHAT[n % len(HOSTILE_WHAT)]
        n += 1
        # the keys as they are now: a key rotation reaches the insider's node and the
        # target's (or, for a stale node, not)
        msg = hostile_request(what, n, spec.index, insider=insider, insider_node=home,
                              target_node=node, target_agent=agent,
                              keys=ctx.config(home).auth.keys,
                              judge_keys=ctx.config(node).auth.keys, now_ms=ctx.wall_ms(),
                              prefix=config.prefix, version=auth.version,
                              max_skew_ms=auth.max_skew_ms)
        yield _inject(spec, ctx, msg)
        _attacked(ctx, msg)
        yield Wait(spec.params["interval_ms"])


def malformed_envelope(spec: FaultSpec, ctx: Context) -> Script:
    """Envelopes and announcements a seed-protocol node must refuse (or, one at the edge of
    well-formed, take), one case after another, each executor in turn (or the one named),
    journaled before each is published."""
    named = spec.params.get("node")
    targets = [n for n in ctx.topology.nodes if n.role.value != "orchestrator" and n.agents
               and (named is None or n.id == named)]
    if not targets:
        yield Refuse(f"{named} is no executor of topology {ctx.topology.name}" if named
                     else f"topology {ctx.topology.name} has no executor")
        return
    cases, prefix = spec.params["cases"], _any_config(ctx).prefix
    n = 0
    while ctx.now_ms() < ctx.end_ms:
        node, case = targets[n % len(targets)], cases[n % len(cases)]
        n += 1
        groups = ctx.config(node.id).scene_groups
        msg = envelope_attacks.malformed_envelope(case, n, spec.index, target_node=node.id,
                                                  target_agent=node.agents[0],
                                                  now_ms=ctx.wall_ms(), prefix=prefix,
                                                  group=groups[0] if groups else None)
        yield _inject(spec, ctx, msg)
        _attacked(ctx, msg)
        yield Wait(spec.params["interval_ms"])


def replay(spec: FaultSpec, ctx: Context) -> Script:
    config = _any_config(ctx)
    auth, topics = config.auth, config.topics
    rng = rng_for(ctx.seed, f"fault/{spec.index}")
    seen: set[bytes] = set()

    def again(topic: str, payload: bytes) -> None:
        # judged with the keys the receiver holds now: a key rotated since the capture
        # (with its overlap) decides what an honest verifier there says
        node = topics.parse(topic).key
        known = {n.id for n in ctx.topology.nodes}
        keys = ctx.config(node).auth.keys if node is not None and node in known else auth.keys
        msg = replayed(payload, spec.index, keys=keys, now_ms=ctx.wall_ms(),
                       max_skew_ms=auth.max_skew_ms, topic=topic)
        if msg is not None:   # its verdict is judged when it is sent, not when captured
            ctx.act(_inject(spec, ctx, msg),
                    lambda outcome: _attacked(ctx, msg) if isinstance(outcome, Done) else None)

    def tap(topic: str, payload: bytes) -> None:
        if topics.parse(topic).kind is not TopicKind.INBOX or payload in seen:
            return
        env = decode(payload)
        if not isinstance(env, Envelope) or env.message_type is not MessageType.TASK_REQUEST:
            return
        seen.add(payload)
        if rng.random() < spec.params["probability"]:
            ctx.later(spec.params["delay_ms"].sample(rng), lambda: again(topic, payload))

    yield Capture(_ref(spec), tap)
    yield HEAL
    yield Capture(_ref(spec), None)   # stop capturing; replays already due still happen


def _tamper(spec: FaultSpec, ctx: Context, what: str) -> Script:
    node = spec.params["node"]
    rng = rng_for(ctx.seed, f"fault/{spec.index}")

    def rewrite(topic: str, payload: bytes) -> bytes | None:
        if rng.random() >= spec.params["probability"]:
            return None
        config = ctx.config(node)   # now: a key rotation since the start changed its keys
        done = tampered(payload, what, spec.index, agents_of_node=config.agents,
                        keys=config.auth.keys, now_ms=ctx.wall_ms(),
                        max_skew_ms=config.auth.max_skew_ms, node=node)
        if done is None:
            return None
        new, event = done
        ctx.attack_sent(event)
        ctx.fired(Firing(event.attack, details={"messageId": event.message_id}))
        return new

    yield Intercept(_ref(spec), node, rewrite)
    yield HEAL
    yield Intercept(_ref(spec), node, None)


def tamper_payload(spec: FaultSpec, ctx: Context) -> Script:
    yield from _tamper(spec, ctx, "payload")


def tamper_routing(spec: FaultSpec, ctx: Context) -> Script:
    yield from _tamper(spec, ctx, "routing")


def tamper_headers(spec: FaultSpec, ctx: Context) -> Script:
    yield from _tamper(spec, ctx, "headers")
