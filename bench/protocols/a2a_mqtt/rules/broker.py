"""A2A over MQTT, what the profile relies on of its MQTT 5 broker (`a2a_broker`)."""

from __future__ import annotations

from collections import defaultdict

from bench.checks import Checker, Collector, rule
from bench.checks.network import LINK_FAULTS, Transit, _drained, fault_windows
from bench.core.events import (
    A2mAttempt,
    A2mPuback,
    AttackSent,
    Event,
    ExecutorsRegistered,
    MqttDisconnected,
    NodeCrashed,
    Wire,
)
from bench.history import History
from bench.protocols.a2a_mqtt import SPEC
from bench.protocols.a2a_mqtt.rules.common import (
    EARLY_MS,
    Took,
    _askers,
    _pool_of,
    _reply_topics,
    intake,
)

#: MQTT 5 §3.4.2.1: the PUBACK reason code of a PUBLISH nobody subscribes to
NO_MATCHING_SUBSCRIBERS = 0x10


#: How many requests to a pool a broker may accept, with no member taking any, before that
#: is its doing and not a member's bad moment: a pool whose every member is down queues
#: them on the members' sessions, and a member back takes them (moat-lib-mqtt 0.8.7
#: accepted 28 and delivered none)
POOL_SILENCE_AFTER = 5


#: How late past its Message Expiry Interval a request may still arrive: the broker counts
#: whole seconds ([MQTT-3.3.2-6] forwards what is left, rounded), and a timer's slack.
EXPIRY_SLACK_MS = 1_000.0 + EARLY_MS


@rule("A2M-POOL-1, A2M-QOS-1; MQTT 5 §4.8.2: a request to a pool reaches a member of its "
      "shared group")
def pooled_requests_reach_the_pool(h: History, c: Collector) -> None:
    """A request published to a pool's topic after a responder subscribed the pool's shared
    filter (`$share/{group}/{pool topic}`) is routed to a member: the broker does not answer
    it 0x10 "no matching subscribers", nor accept request after request (POOL_SILENCE_AFTER
    of them) that no member ever takes. A broker that cannot route a shared filter on a
    topic that starts with `$` — every profile pool's — serves no pool at all."""
    joined: dict[str, float] = {}
    members: dict[str, set[str]] = defaultdict(set)
    for r in h.of(ExecutorsRegistered):
        for f in r.subscribed:
            if f.startswith("$share/"):
                pool = _pool_of(f.split("/", 2)[2])
                if pool is not None:
                    joined.setdefault(pool, r.t_ms)
                    members[pool].add(r.node)
    answered: set[str] = set()     # pools a PUBACK with a reason code was heard from
    for p in h.of(A2mPuback):
        pool = _pool_of(p.topic)
        if pool is None:
            continue
        c.count("pooled_pubacks_with_a_reason")
        answered.add(pool)
        if p.reason_code == NO_MATCHING_SUBSCRIBERS and pool in joined \
                and joined[pool] <= p.t_ms:
            c.violation(f"the broker answered {p.node}'s request to {pool!r} 0x10 (no matching "
                        f"subscribers), though a responder had subscribed its shared filter", p)
    c.count("pools_joined", len(joined))
    # a broker may say success and route it nowhere: not one of many accepted requests
    # taken (a requester records a PUBACK that says more than success: none here did)
    taken = {_pool_of(t.topic) for t in h.memo(intake)}
    sent: dict[str, list[A2mAttempt]] = defaultdict(list)
    for a in h.of(A2mAttempt):
        pool = _pool_of(a.topic)
        if pool is not None and pool in joined and joined[pool] <= a.t_ms:
            sent[pool].append(a)
    away = {e.node for e in h.of(MqttDisconnected)} | {e.node for e in h.of(NodeCrashed)}
    for pool, attempts in sent.items():
        if len(attempts) >= POOL_SILENCE_AFTER and pool not in taken | answered:
            if members[pool] <= away:      # every member was away at some time: its doing?
                c.unknown("no_member_took_a_request_and_every_member_was_away_once")
                continue
            c.violation(f"the broker accepted {len(attempts)} requests to {pool!r} (no PUBACK "
                        "refused one) and not one reached a member of its shared group",
                        attempts[0], attempts[-1])


@rule("MQTT 5 §4.8.2 (a shared subscription's message goes to one session of the group); "
      "A2M-POOL-1: a request to a pool reaches one member")
def pooled_requests_reach_one_member(h: History, c: Collector) -> None:
    """A request published to a pool (one attempt: one Correlation Data) is taken by one
    member of the pool, not by several: a broker that hands a shared subscription's message
    to every member makes each of them run the task. Allowed: a second member taking it
    after the first one's connection or process died (MQTT 5 §4.8.2 lets the broker send
    a lost member's unacknowledged message to another)."""
    takers: dict[tuple[str | None, str], list[Took]] = defaultdict(list)
    for t in h.memo(intake):
        if t.correlation is not None and _pool_of(t.topic):
            # Correlation Data is unique on one reply topic only (A2M-REQ-1)
            takers[(t.response_topic, t.correlation)].append(t)
    transit = h.memo(Transit)
    gone: dict[str, list[float]] = defaultdict(list)
    for d in h.of(MqttDisconnected):
        gone[d.node].append(d.t_ms)
    sender: dict[tuple[str | None, str], A2mAttempt] = {}
    reply_topics = h.memo(_reply_topics)
    for a in h.of(A2mAttempt):
        for topic in reply_topics[a.node]:
            sender.setdefault((topic, a.correlation or ""), a)
    for (reply_topic, corr), taken in sorted(takers.items(), key=lambda kv: (str(kv[0][0]),
                                                                               kv[0][1])):
        c.count("pooled_requests_taken")
        first = taken[0]
        others = sorted({t.node for t in taken} - {first.node})
        if not others:
            continue
        lost = [t for t in (*transit.crashes[first.node], *gone[first.node]) if t >= first.t_ms]
        if lost:
            c.count("taken_again_after_its_member_was_lost")
            continue
        # QoS 1 is at least once: a requester whose connection dropped before the broker's
        # PUBACK reached it sends the PUBLISH again, and the broker routes the copy anew
        by = sender.get((reply_topic, corr))
        if by is not None and any(by.t_ms <= t <= taken[-1].t_ms for t in (
                *gone[by.node], *transit.crashes[by.node])):
            c.count("sent_again_across_its_requesters_reconnect")
            continue
        c.violation(f"pooled request {corr} went to {first.node} and also to "
                    f"{', '.join(others)}: the broker gave one shared-group message to "
                    f"{len(others) + 1} members", *(t.event for t in taken))


#: Failure reason codes of a PUBACK start here (MQTT 5 §3.4.2.1)
PUBACK_FAILURE = 0x80


#: How long after a refusing fault's heal a refusal may still be heard: the PUBACK of a
#: publish refused just before it, on its way back
REFUSED_IN_FLIGHT_MS = 1_000.0


@rule("MQTT 5 §3.4.2.1 (a PUBACK failure reason code says why the broker refused): a "
      "request publish is refused only while a fault that refuses its sender's publishes acts")
def refusals_have_a_cause(h: History, c: Collector) -> None:
    """The bench configures no quota, ACL or limit that would make a broker refuse a
    requester's PUBLISH: every PUBACK failure (0x80 and above) a requester hears — its own
    record (`A2mPuback`), or off its wire tap the PUBACK that reached it — falls inside the
    window of a `puback_refused` fault naming it, or within REFUSED_IN_FLIGHT_MS after its
    heal. A refusal outside is a broker refusing what it had no reason to refuse (a profile
    request on a `$a2a/...` topic), or a fault that went on acting after the history says it
    healed — and then every rule that excuses what happened in the window excused the wrong
    span."""
    windows = [w for w in h.memo(fault_windows) if w.fault == "puback_refused"]
    own = h.memo(_askers)
    heard: list[tuple[str, float, int, str, Event]] = [
        (p.node, p.t_ms, p.reason_code, p.topic, p) for p in h.of(A2mPuback)
        if p.reason_code >= PUBACK_FAILURE]
    heard += [(w.node, w.t_ms, code, "", w) for w in h.of(Wire)
              if w.node not in own and w.direction == "in" and w.packet == "PUBACK"
              for code in (w.reason_codes or ())[:1] if code >= PUBACK_FAILURE]
    for node, t, code, topic, event in heard:
        c.count("publishes_refused")
        if any(w.acts_on(t - REFUSED_IN_FLIGHT_MS, t, node) for w in windows):
            continue
        where = f" to {topic}" if topic else ""
        c.violation(f"the broker refused {node}'s publish{where} at {t:.0f} ms with 0x{code:02x} "
                    f"while no fault refused its publishes", event)


@rule("MQTT 5 §3.3.2.3.3 [MQTT-3.3.2-5]: a message past its Message Expiry Interval is not "
      "delivered; A2M-RETRY-9, A2M-DUP-2")
def expired_requests_not_delivered(h: History, c: Collector) -> None:
    """A request published with a Message Expiry Interval reaches no responder after that
    interval: a broker keeping it for a responder that is away (its session queues it) must
    drop it once it expires, not hand a stale request to the responder when it comes back.
    The broker counts whole seconds: a delivery within a second past the interval passes.
    Undecided where a slow link (latency, loss, a partition, a pause) on the requester's or
    the responder's side held the request out of the broker's sight meanwhile."""
    reply_topics = h.memo(_reply_topics)
    windows = h.memo(fault_windows)
    sent = {(topic, a.correlation): a for a in h.of(A2mAttempt) if a.expiry_s is not None
            for topic in reply_topics[a.node]}
    taken: dict[tuple[str | None, str | None], Took] = {}
    for t in h.memo(intake):
        if (t.response_topic, t.correlation) in sent:
            taken.setdefault((t.response_topic, t.correlation), t)
    for (topic, corr), a in sorted(sent.items()):
        assert a.expiry_s is not None
        c.count("requests_with_an_expiry")
        due = a.t_ms + a.expiry_s * 1000.0
        got = taken.get((topic, corr))
        if got is None:
            if due < h.end_ms:
                c.count("outlived_their_expiry")
            continue
        if got.t_ms > due + EXPIRY_SLACK_MS:
            c.count("outlived_their_expiry")
            # the broker's clock starts when the PUBLISH reaches it and stops when it sends
            # it on: a slow link on either side moves both out of sight
            # (a lossy link holds what follows a loss until it has caught up: _drained)
            if any(w.fault in LINK_FAULTS and {a.node, got.node} & set(w.nodes)
                   and w.start_ms <= got.t_ms and a.t_ms <= max(
                       [w.end_ms] if w.fault != "loss" else
                       [_drained(h, n, w.end_ms) for n in w.nodes])
                   for w in windows):
                c.unknown("delivered_late_across_a_slow_link")
                continue
            c.violation(f"{got.node} took request {corr} {(got.t_ms - a.t_ms) / 1000:.1f} s "
                        f"after it was published with a Message Expiry Interval of "
                        f"{a.expiry_s} s", a, got.event)


@rule("MQTT 5 §3.3.2.3.5 [MQTT-3.3.2-15], §3.3.2.3.6 [MQTT-3.3.2-16]: the Server MUST send the "
      "Response Topic and the Correlation Data unaltered; A2M-RSP-2, A2M-RR-2")
def requests_keep_their_reply_path(h: History, c: Collector) -> None:
    """A request reaches its responder with the Response Topic and the Correlation Data it
    was published with. The bench's requesters publish every attempt with both
    (a2m_attempt); a responder that took a request without one, on a topic only they
    published to, got it from a broker that dropped it — and can answer nothing. Not
    judged for a responder an attack was sent to (the nemesis sends requests without them
    on purpose), nor from the moment a property_tampering fault began (a request it
    stripped may be delivered again after it healed)."""
    attempted = {a.topic for a in h.of(A2mAttempt)}
    attacked = {a.target_node_id for a in h.of(AttackSent)}
    tampering = [w for w in h.memo(fault_windows) if w.fault == "property_tampering"]
    for t in h.memo(intake):      # the reference's record, or anyone's wire tap
        if t.topic not in attempted:
            continue
        c.count("requests_taken")
        if t.response_topic is not None and t.correlation is not None:
            continue
        if t.node in attacked:
            c.count("taken_by_an_attacked_responder")
            continue
        # (a request it stripped may come again after it healed: a redelivery's copy)
        if any(w.start_ms <= t.t_ms for w in tampering):
            c.count("taken_after_a_fault_tampered_with_properties")   # the nemesis's doing
            continue
        lost = " and ".join(name for name, v in (("Response Topic", t.response_topic),
                                                 ("Correlation Data", t.correlation))
                            if v is None)
        c.violation(f"{t.node} took a request on {t.topic} at {t.t_ms:.0f} ms without its "
                    f"{lost}: the bench's requesters publish every request with both", t.event)


def _no_broker_promise(h: History) -> str | None:
    if any(_pool_of(a.topic) or a.expiry_s is not None for a in h.of(A2mAttempt)):
        return None
    attempted = {a.topic for a in h.of(A2mAttempt)}
    if any(t.topic in attempted for t in h.memo(intake)):
        return None      # a request of the bench's taken: its properties are judged
    if any(p.reason_code >= PUBACK_FAILURE for p in h.of(A2mPuback)) or any(
            w.packet == "PUBACK" and w.direction == "in" and w.reason_codes
            and w.reason_codes[0] >= PUBACK_FAILURE for w in h.of(Wire)):
        return None
    return ("no request went to a pool, none carried a Message Expiry Interval, none of "
            "the bench's requesters' reached a responder, and the broker refused none")


A2A_BROKER = Checker(
    "a2a_broker", "A2A over MQTT, what the profile relies on of its MQTT 5 broker: a pooled "
    "request reaches one member of the pool's shared group (a broker that answers 'no "
    "matching subscribers' serves no pool; one that copies it to every member runs it "
    "twice); a request past its Message Expiry Interval is not delivered; a request is "
    "refused only while a fault refuses its sender's publishes; a request reaches its "
    "responder with its Response Topic and Correlation Data.",
    (pooled_requests_reach_the_pool, pooled_requests_reach_one_member,
     expired_requests_not_delivered, refusals_have_a_cause, requests_keep_their_reply_path),
    _no_broker_promise,
    protocols=frozenset({SPEC.name}))
