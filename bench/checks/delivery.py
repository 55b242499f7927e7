"""Delivery (DESIGN §3–§4, §7; seed 002 §3–§5): no silent loss, targeted delivery, reply
routing, QoS1 at-least-once."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from bench.checks import Checker, Collector, rule
from bench.core.events import (
    AttackSent,
    BrokerDown,
    BrokerUp,
    Event,
    ExecutorsRegistered,
    FaultFired,
    FaultHealed,
    FaultStart,
    GateDecisionSent,
    GateOpenSent,
    InboundAdmitted,
    InboundDropped,
    MqttConnected,
    MqttDisconnected,
    NodeCrashed,
    NodeStarted,
    OutboundSettled,
    RelaySent,
    RequestSent,
    RequestSettled,
    RequestsRestored,
    ResponseUnmatched,
    RosterLoaded,
    TaskExecuted,
    TaskState,
    Warning,
    WarningKind,
)
from bench.history import History

#: DESIGN §3: the executor every node registers when its roster is empty.
DEFAULT_EXECUTOR = "a2a-local-executor"
#: Send states that say "we know it did not go out" (DESIGN §3 Outbound).
EXPLAINING_STATES = frozenset({"UNDELIVERABLE", "FAILED"})
TARGETED = frozenset({"TASK_REQUEST", "TASK_RESPONSE", "DATA_REQUEST", "DATA_RESPONSE"})
#: A message published this close to the end of the history may still be on its way.
IN_FLIGHT_AT_END_MS = 2_000


def _namespace(agent_id: str) -> str:
    """DESIGN §3: an agentId is `namespace.capability`."""
    return agent_id.split(".", 1)[0]


def _inbox_of(topic: str | None) -> str | None:
    """The node a targeted topic `{prefix}/node/{nodeId}/inbox` addresses, read from its
    shape (DESIGN §3 Topics), else None."""
    parts = (topic or "").split("/")
    return parts[-2] if len(parts) >= 4 and parts[-3] == "node" and parts[-1] == "inbox" else None


# -- silent loss ------------------------------------------------------------------------------------
def _settled(h: History) -> dict[tuple[str, str], list[RequestSettled]]:
    settled: dict[tuple[str, str], list[RequestSettled]] = defaultdict(list)
    for e in h.of(RequestSettled):
        settled[(e.node, e.request_id)].append(e)
    return settled


def restored_settled(h: History) -> dict[tuple[str, str], tuple[float, str]]:
    """(node, request) -> (when, outcome) for each settlement a restarted requester read
    back (requests_restored) that its journal never showed: written, then a kill cut the
    record, which follows the write."""
    journaled = _settled(h)
    out: dict[tuple[str, str], tuple[float, str]] = {}
    for r in h.of(RequestsRestored):
        for request_id, outcome in r.settled.items():
            key = (r.node, request_id)
            if key not in journaled:
                out.setdefault(key, (r.t_ms, outcome))
    return out


@rule("DESIGN §3 Tasks: the requester's pending future ends once")
def settles_once(h: History, c: Collector) -> None:
    """Every request ends in exactly one outcome, by its deadline (one still pending when
    the run ends is undecided). A settlement the journal lacks counts if the requester,
    restarted, read it back settled (requests_restored): the kill cut its record."""
    settled = _settled(h)
    restored = h.memo(restored_settled)
    for sent in h.of(RequestSent):
        c.count("requests")
        outcomes = settled.get((sent.node, sent.request_id), [])
        if not outcomes and (back := restored.get((sent.node, sent.request_id))) is not None \
                and back[0] > sent.t_ms:
            c.count("settled_unjournaled_before_a_crash")
            c.count(f"outcome_{back[1].lower()}")
            continue
        if not outcomes:
            if sent.t_ms + sent.timeout_ms > h.end_ms:   # the deadline is on the node's clock
                c.unknown("pending_at_end")
            else:
                c.violation(f"request {sent.request_id} passed its deadline and never settled",
                            sent)
            continue
        if len(outcomes) > 1:
            c.violation(f"request {sent.request_id} settled {len(outcomes)} times", sent,
                        *outcomes)
        c.count(f"outcome_{outcomes[0].outcome.lower()}")


#: Every node: an outage of the broker reaches them all.
EVERY_NODE = "*"


@dataclass(frozen=True, slots=True)
class Outage:
    """A span during which a node (or every node) could lose requests: its process down,
    its link cut or slowed, the broker down, its client id taken over."""

    node: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """One scheduled fault from its start to its heal (or the end of the history), with
    the nodes it names (`nodes`, `node`, `impostor`)."""

    fault: str
    start_ms: float
    end_ms: float
    nodes: tuple[str, ...]


def fault_windows(h: History) -> list[FaultWindow]:
    """Every fault the journal started, with the window it really had."""
    healed = {e.fault_index: e.t_ms for e in h.of(FaultHealed)}
    out = []
    for f in h.of(FaultStart):
        params = f.params if isinstance(f.params, dict) else {}
        many = params.get("nodes")
        named = [*(many if isinstance(many, list) else []),
                 *(params[k] for k in ("node", "impostor") if params.get(k) is not None)]
        out.append(FaultWindow(f.fault, f.t_ms, healed.get(f.fault_index, h.end_ms),
                               tuple(map(str, named))))
    return out


def _outages(h: History) -> list[Outage]:
    """The real outages the journal shows, node by node — a crash or a lost connection
    until the node's client is connected again, a partition or a link fault for its
    window (and, if it cost the node its connection, on until it reconnected), the broker
    from its stop to its start and, for each node, on until that node's client has
    connected again — never "from the fault to the end of the run"."""
    out: list[Outage] = []
    connects: dict[str, list[float]] = defaultdict(list)
    for m in h.of(MqttConnected):
        connects[m.node].append(m.t_ms)
    drops: dict[str, list[float]] = defaultdict(list)
    for x in h.of(MqttDisconnected):
        drops[x.node].append(x.t_ms)

    def back_after(node: str, t_ms: float) -> float:
        return next((t for t in connects[node] if t >= t_ms), h.end_ms)

    for crash in h.of(NodeCrashed):
        out.append(Outage(crash.node, crash.t_ms, back_after(crash.node, crash.t_ms)))
    for node, times in drops.items():
        out.extend(Outage(node, t, back_after(node, t)) for t in times)

    for f in h.memo(fault_windows):
        if f.fault in LINK_FAULTS:
            for node in f.nodes:
                # a connection the fault killed is back only once the node reconnected
                lost = any(f.start_ms <= t <= f.end_ms for t in drops[node])
                end = back_after(node, f.end_ms) if lost else f.end_ms
                if f.fault == "loss":   # what it lost is sent again, and the rest waits
                    end = max(end, _drained(h, node, f.end_ms))
                out.append(Outage(node, f.start_ms, end))
        elif f.fault == "duplicate_client_id":
            out.extend(Outage(node, f.start_ms, f.end_ms) for node in f.nodes)
    stops = [e.t_ms for e in h.of(FaultFired) if e.action.startswith(BROKER_DOWN)]
    starts = [e.t_ms for e in h.of(FaultFired) if e.action == "broker started"]
    # the bench's watch of the broker, planned or not (live: its process, or a probe client)
    stops += [e.t_ms for e in h.of(BrokerDown)]
    starts = sorted([*starts, *(e.t_ms for e in h.of(BrokerUp))])
    for stop in stops:
        start = next((t for t in starts if t >= stop), h.end_ms)
        out.append(Outage(EVERY_NODE, stop, start))
        for node in connects:
            # a node's client is back only once it has reconnected, after its backoff
            out.append(Outage(node, stop, back_after(node, start)))
    return out


def _round_trips(h: History) -> dict[str, list[tuple[float, float]]]:
    """node -> (sent, acknowledged) of each message it published: a request, a relayed
    frame, a gate message (their sent events) or a task's response (sent when the task
    ended)."""
    acked = {o.message_id: o.t_ms for o in h.of(OutboundSettled) if o.state == "PUBLISHED"}
    answered = {(o.node, o.request_id): o.t_ms for o in h.of(OutboundSettled)
                if o.state == "PUBLISHED" and o.message_type == "TASK_RESPONSE"}
    trips: dict[str, list[tuple[float, float]]] = defaultdict(list)
    sends: list[RequestSent | RelaySent | GateOpenSent | GateDecisionSent] = [
        *h.of(RequestSent), *h.of(RelaySent), *h.of(GateOpenSent), *h.of(GateDecisionSent)]
    for s in sends:
        if s.message_id in acked:
            trips[s.node].append((s.t_ms, acked[s.message_id]))
    for t in h.of(TaskState):
        if (t.node, t.task_id) in answered and t.state in ("COMPLETED", "FAILED"):
            trips[t.node].append((t.t_ms, answered[(t.node, t.task_id)]))
    return trips


def _drained(h: History, node: str, healed_ms: float) -> float:
    """When `node`'s connection had caught up after a loss ended at `healed_ms`: TCP
    retransmits what was lost in order, so what is sent later waits behind it — until
    the first message sent after the heal is acknowledged, or TCP gave up."""
    done = [acked for sent, acked in h.memo(_round_trips)[node] if sent >= healed_ms]
    return float(min([*done, healed_ms + TCP_GIVE_UP_MS, h.end_ms]))


#: Faults on the nodes' links (DESIGN §6): the nodes named lose or delay what crosses them.
#: Faults that silence or slow a node's traffic for their window (a frozen node too).
LINK_FAULTS = frozenset({"partition", "latency", "loss", "pause"})
BROKER_DOWN = ("broker crashed", "broker stopped", "broker killed")


def _target_of(h: History) -> dict[str, str]:
    """requestId -> the node its TASK_REQUEST was published to: the node it addressed, or
    else the inbox its topic names."""
    target: dict[str, str] = {}
    for o in h.of(OutboundSettled):
        node = o.target_node_id or _inbox_of(o.topic)
        if o.request_id and o.message_type == "TASK_REQUEST" and node:
            target[o.request_id] = node
    return target


#: The states a task ends in (DESIGN §3 Tasks).
TASK_ENDS = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"})


def _still_running(h: History) -> dict[str, float]:
    """messageId of a TASK_REQUEST -> when the task it started ended (inf: never), for every
    request some node executed."""
    ended: dict[tuple[str, str], float] = {}
    for t in h.of(TaskState):
        if t.state in TASK_ENDS:
            ended.setdefault((t.node, t.task_id), t.t_ms)
    return {x.message_id: ended.get((x.node, x.task_id), float("inf"))
            for x in h.of(TaskExecuted)}


@rule("DESIGN §7 no silent loss; seed 000 §3.3 (a mute receiver loses requests silently)")
def no_response_explained(h: History, c: Collector) -> None:
    """A request that got no response has an exact explanation in the history: its send
    or its response's ended UNDELIVERABLE or FAILED; the request or its response was
    dropped, with a reason other than DUPLICATE, by the node it reached, or lost by the
    network as the journal explains (Transit); or the requester,
    the target or the broker was out (down, cut off, slowed, taken over) during its
    lifetime; or the task it started was still running when the requester gave up, or
    its response reached the requester after that (it shows as unmatched). Otherwise it
    was lost silently."""
    target = _target_of(h)
    explained: set[str] = set()
    transit = h.memo(Transit)
    for o in h.of(OutboundSettled):
        if o.request_id and o.state in EXPLAINING_STATES:
            explained.add(o.request_id)
        elif o.request_id and o.state == "PUBLISHED" and o.target_node_id and \
                o.message_type in ("TASK_REQUEST", "TASK_RESPONSE") and \
                transit.lost(o.node, o.t_ms, o.target_node_id) is not None:
            explained.add(o.request_id)   # the network lost it, as the journal explains
    requesters = {s.request_id: s.node for s in h.of(RequestSent)}
    for d in h.of(InboundDropped):
        rid = d.request_id
        if rid and d.reason != "DUPLICATE" and d.node in (target.get(rid), requesters.get(rid)):
            explained.add(rid)
    outages = transit.outages
    task_ended = _still_running(h)
    settled = _settled(h)
    # the response came, after the requester had given up: slow, not lost. (Before it gave
    # up, a response it could not match is the requester's fault, and explains nothing.)
    late = {(u.node, u.request_id) for u in h.of(ResponseUnmatched) if u.request_id
            and any(s.t_ms <= u.t_ms for s in settled.get((u.node, u.request_id), []))}
    for sent in h.of(RequestSent):
        outcomes = settled.get((sent.node, sent.request_id), [])
        if not outcomes or outcomes[0].outcome != "NO_RESPONSE":
            continue
        outcome = outcomes[0]
        if sent.request_id in explained:
            c.count("no_response_explained_by_record")
            continue
        involved = {sent.node, target.get(sent.request_id, sent.node), EVERY_NODE}
        if any(o.node in involved and o.start_ms <= outcome.t_ms and o.end_ms >= sent.t_ms
               for o in outages):
            c.count("no_response_during_outage")
            continue
        if task_ended.get(sent.message_id, -1.0) > outcome.t_ms:
            c.count("no_response_task_slower_than_timeout")
            continue
        if (sent.node, sent.request_id) in late:
            c.count("no_response_answered_too_late")
            continue
        c.violation(f"request {sent.request_id} to {sent.to_agent_id} got no response and "
                    "nothing in the history says why", sent, outcome, requestId=sent.request_id)


@rule("DESIGN §3 Inbound: every drop carries its reason, and the reason is true")
def drops_are_true(h: History, c: Collector) -> None:
    """A drop explains a lost message only if its reason is true, so each is checked: a
    DUPLICATE had reached the node before (admitted or dropped), unless the node crashed
    since the message was first sent (the record may have died with it); a SELF_LOOP is
    a message the node sent itself (it settled it, or another node took it in from it); a
    request addressed to the node is NOT_MINE only for an agent it had not registered (its
    roster and executors, since it last started; one addressed elsewhere reached it through
    a borrowed client id); nothing the bench sends is MALFORMED."""
    sent_by: dict[str, set[str]] = defaultdict(set)    # message -> nodes that sent it
    first_sent: dict[str, float] = {}
    to_agent: dict[str, str | None] = {}
    target: dict[str, str | None] = {}
    for o in h.of(OutboundSettled):
        sent_by[o.message_id].add(o.node)
        first_sent.setdefault(o.message_id, o.t_ms)
        to_agent.setdefault(o.message_id, o.to_agent_id)
        target.setdefault(o.message_id, o.target_node_id)
    for s in h.of(RequestSent):
        first_sent[s.message_id] = min(first_sent.get(s.message_id, s.t_ms), s.t_ms)
    attacks = {a.message_id for a in h.of(AttackSent)}   # forged or replayed: judged by auth
    # a message another node took in from its origin was sent by it, settled or not: its
    # sender may have crashed, or lost its client, before the PUBACK came
    for got in h.of(InboundAdmitted):
        if got.origin_node_id is not None and got.message_id not in attacks:
            sent_by[got.message_id].add(got.origin_node_id)
    seen: set[tuple[str, str]] = set()
    agents: dict[str, set[str]] = defaultdict(set)
    crashes: dict[str, list[float]] = defaultdict(list)
    events: list[Event] = sorted([*h.of(InboundAdmitted), *h.of(InboundDropped),
                                  *h.of(NodeStarted), *h.of(NodeCrashed), *h.of(RosterLoaded),
                                  *h.of(ExecutorsRegistered)], key=lambda e: e.seq)
    for e in events:
        match e:
            case NodeStarted():
                agents[e.node].clear()
            case NodeCrashed():
                crashes[e.node].append(e.t_ms)
            case RosterLoaded() | ExecutorsRegistered():
                agents[e.node] |= set(e.agents)
            case InboundAdmitted():
                seen.add((e.node, e.message_id))
            case InboundDropped():
                c.count(f"dropped_{e.reason.lower()}")
                mid = e.message_id or ""
                before = (e.node, mid) in seen
                seen.add((e.node, mid))
                if mid in attacks:
                    continue
                if e.reason == "MALFORMED":
                    c.violation(f"{e.node} dropped {mid or 'a message'} as MALFORMED "
                                f"({e.detail}): nothing the bench sends is", e)
                elif e.reason == "SELF_LOOP" and e.node not in sent_by.get(mid, set()):
                    c.violation(f"{e.node} dropped {mid} as its own message (SELF_LOOP) but "
                                "never sent it", e)
                elif e.reason == "DUPLICATE" and not before and not any(
                        first_sent.get(mid, -math.inf) <= t <= e.t_ms for t in crashes[e.node]):
                    c.violation(f"{e.node} dropped {e.message_type} {mid} as a DUPLICATE it "
                                "had never had", e)
                elif e.reason == "NOT_MINE" and e.message_type == "TASK_REQUEST" \
                        and target.get(mid) == e.node and to_agent.get(mid) in agents[e.node]:
                    c.violation(f"{e.node} refused {mid} for {to_agent[mid]} as NOT_MINE "
                                "although it had registered that agent", e)


#: Node clocks read whole milliseconds; the bench's are floats.
CLOCK_SLACK_MS = 1.0


@rule("DESIGN §3 Tasks: the requester's future times out after its timeout, not before")
def no_response_not_early(h: History, c: Collector) -> None:
    """A request is given up (NO_RESPONSE) only once its timeout has passed, never
    before: early on the requester's own clock and on the bench's both. (A clock set off
    during the request moves the first, as it would a real node's wall clock, while its
    timers keep real time.)"""
    sent = {(s.node, s.request_id): s for s in h.of(RequestSent)}
    for e in h.of(RequestSettled):
        s = sent.get((e.node, e.request_id))
        if e.outcome == "NO_RESPONSE" and s is not None and e.latency_ms < s.timeout_ms \
                and e.t_ms - s.t_ms < s.timeout_ms - CLOCK_SLACK_MS:
            c.violation(f"request {e.request_id} gave up after {e.latency_ms} ms, before its "
                        f"{s.timeout_ms} ms timeout", s, e)


# -- targeted delivery --------------------------------------------------------------------------------
@rule("DESIGN §3 Topics and Outbound; seed 000 §2.2 (toAgentId used as nodeId)")
def published_to_a_node(h: History, c: Collector) -> None:
    """A targeted message is published to the inbox of the node it addresses, and that
    address is a node of the deployment."""
    nodes = h.nodes
    for e in h.of(OutboundSettled):
        if e.state != "PUBLISHED" or e.message_type == "EVENT":
            continue
        c.count("targeted_published")
        target = e.target_node_id
        if target not in nodes:
            c.violation(f"{e.message_type} {e.message_id} was published to {e.topic!r}: "
                        f"targetNodeId {target!r} is not a node", e)
        elif _inbox_of(e.topic) != target:
            c.violation(f"{e.message_id} targeted {target} but went to {e.topic!r}", e)


@rule("DESIGN §3 Outbound: LOCAL_CONSUMED when the target is this node")
def own_messages_stay_local(h: History, c: Collector) -> None:
    """A message whose target is the node that sends it is handed over inside the node
    (LOCAL_CONSUMED), never published to its own inbox: a round trip through the broker
    that can be lost, duplicated or delayed for nothing."""
    for e in h.of(OutboundSettled):
        if e.target_node_id != e.node:
            continue
        c.count("to_itself")
        if e.state == "PUBLISHED":
            c.violation(f"{e.node} published {e.message_type} {e.message_id} to its own inbox "
                        f"{e.topic!r} instead of consuming it locally", e)


@rule("DESIGN §3 Inbound; seed 002 §5 red line 4 (no broadcast fallback)")
def consumed_by_addressee(h: History, c: Collector) -> None:
    """A targeted message is consumed only by the node its targetNodeId names."""
    for e in h.of(InboundAdmitted):
        if e.message_type not in TARGETED:
            continue
        c.count("targeted_consumed")
        if e.target_node_id != e.node:
            c.violation(f"{e.message_type} {e.message_id} addressed to {e.target_node_id!r} "
                        f"was consumed by {e.node}", e)


@rule("DESIGN §3 Directory and roster: canHandle by namespace; seed 000 §2.3")
def no_foreign_namespace(h: History, c: Collector) -> None:
    """A TASK_REQUEST is handled only by a node of the agent's namespace (or its default
    executor), never by a "helpful" node of another namespace."""
    for e in h.of(InboundAdmitted):
        if e.message_type != "TASK_REQUEST":
            continue
        to = e.to_agent_id or ""
        node_ns = h.namespace_at(e.node, e.seq)
        if to != DEFAULT_EXECUTOR and _namespace(to) != node_ns:
            c.violation(f"TASK_REQUEST for {to!r} executed by {e.node} in namespace "
                        f"{node_ns!r}", e)


# -- reply routing -------------------------------------------------------------------------------------
def _requests(h: History) -> dict[tuple[str, str], InboundAdmitted]:
    requests: dict[tuple[str, str], InboundAdmitted] = {}
    for e in h.of(InboundAdmitted):
        if e.message_type == "TASK_REQUEST" and e.request_id:
            requests.setdefault((e.node, e.request_id), e)
    return requests


def _responses(h: History) -> list[OutboundSettled]:
    return [e for e in h.of(OutboundSettled) if e.message_type == "TASK_RESPONSE"]


@rule("DESIGN §3 Tasks: headers.requestId echoed")
def response_echoes_request(h: History, c: Collector) -> None:
    """Every TASK_RESPONSE carries the requestId of the request it answers."""
    for e in _responses(h):
        c.count("responses")
        if not e.request_id:
            c.violation(f"response {e.message_id} does not echo a requestId", e)


@rule("DESIGN §3 Tasks; seed 002 §3.2 (D14: reply to replyNodeId, never to fromAgentId)")
def response_to_reply_node(h: History, c: Collector) -> None:
    """A TASK_RESPONSE goes to the node the request named in headers.replyNodeId."""
    requests = _requests(h)
    for e in _responses(h):
        req = requests.get((e.node, e.request_id)) if e.request_id else None
        if e.request_id and req is None:
            c.count("request_not_in_history")  # e.g. admitted before a restart's history gap
        if req is None or not req.reply_node_id:
            continue
        if e.target_node_id != req.reply_node_id:
            c.violation(f"response to {e.request_id} sent to {e.target_node_id!r}, but the "
                        f"request named replyNodeId {req.reply_node_id!r}", req, e)
        else:
            c.count("routed_to_reply_node")


@rule("DESIGN §3 Tasks: no replyNodeId is a warning and an UNDELIVERABLE response")
def missing_reply_node_explicit(h: History, c: Collector) -> None:
    """A request without replyNodeId gets a warning and an UNDELIVERABLE response, never a
    guessed address."""
    requests = _requests(h)
    warned = {(w.node, w.task_id) for w in h.of(Warning)
              if w.what is WarningKind.MISSING_REPLY_NODE}
    for e in _responses(h):
        req = requests.get((e.node, e.request_id)) if e.request_id else None
        if req is None or req.reply_node_id:
            continue
        ok_warned = (e.node, e.request_id) in warned
        if e.state != "UNDELIVERABLE" or not ok_warned:
            c.violation(f"request {e.request_id} had no replyNodeId, yet its response was "
                        f"{e.state} to {e.target_node_id!r}"
                        + ("" if ok_warned else " without a warning"), req, e)
        else:
            c.count("missing_reply_node_made_explicit")


# -- QoS1 --------------------------------------------------------------------------------------------
@rule("DESIGN §4 QoS1 redelivery; MQTT 3.1.1 §4.3.2 (QoS1 is at least once)")
def published_reaches_addressee(h: History, c: Collector) -> None:
    """Every targeted message the broker accepted (PUBLISHED) reaches the node it addresses
    — admitted there, or at least dropped there with a reason — across reconnects and
    restarts of that node. Messages a broker restarted without persistence lost — accepted
    before the wipe, or after it but before the target had subscribed again (nothing routes
    them then) — or that went to a client id another node had taken over, are counted
    apart."""
    seen: set[tuple[str, str]] = set()
    for a in h.of(InboundAdmitted):
        seen.add((a.node, a.message_id))
    for d in h.of(InboundDropped):
        if d.message_id:
            seen.add((d.node, d.message_id))
    transit = h.memo(Transit)
    nodes = h.nodes
    for e in h.of(OutboundSettled):
        if e.state != "PUBLISHED" or e.message_type == "EVENT":
            continue
        target = e.target_node_id
        if target not in nodes:
            continue  # not an address at all: targeted_delivery's business
        c.count("published")
        if (target, e.message_id) in seen:
            c.count("delivered")
            continue
        if e.t_ms > h.end_ms - IN_FLIGHT_AT_END_MS:
            c.unknown("in_flight_at_end")
            continue
        why = transit.lost(e.node, e.t_ms, target)
        if why in Transit.UNDECIDED:
            c.unknown(why)
            continue
        if why is not None:
            c.count(why)
            continue
        c.violation(f"{e.message_type} {e.message_id} was accepted by the broker for {target} "
                    "and never reached it", e, target=target)


#: How long after the broker accepted a PUBLISH its PUBACK is back at the publisher, at
#: most, on a link no fault slows (a loopback or LAN round trip, with room for a busy host).
PUBACK_WITHIN_MS = 250.0
#: How long a segment can stay in TCP's retransmission loop before the connection is given
#: up: a timeout of 200 ms doubling up to 60 s (RFC 6298), 15 retransmissions (Linux's
#: tcp_retries2) — about 462 s. A connection delivers in order, so a message sent behind
#: such a segment, even after the loss ended, may arrive that late (head-of-line blocking).
TCP_GIVE_UP_MS = sum(min(200.0 * 2 ** k, 60_000.0) for k in range(15))


class Transit:
    """What the network may have done with a message the broker accepted, from the
    journal alone: lost it with a broker that forgot its sessions, handed it to another
    node holding the target's client id, or still be carrying it when the run ended (the
    target cut off, or its connection retransmitting what a lossy link lost — the message
    itself or, in order behind it, whatever was sent earlier)."""

    #: Reasons that leave the message's fate open (UNKNOWN), not explained.
    UNDECIDED = frozenset({"target_out_until_end", "retransmitting_over_a_lossy_link"})

    def __init__(self, h: History) -> None:
        self.h = h
        self.end_ms = h.end_ms
        self.wipes = [0.0] + [f.t_ms for f in h.of(FaultStart) if f.fault == "broker_restart"
                              and isinstance(f.params, dict)
                              and not f.params.get("persistence", True)]
        self.subscribed: dict[str, list[float]] = defaultdict(list)   # SUBACKs of inboxes
        for r in h.of(ExecutorsRegistered):
            self.subscribed[r.node].append(r.t_ms)
        self.connects: dict[str, list[float]] = defaultdict(list)
        for m in h.of(MqttConnected):
            self.connects[m.node].append(m.t_ms)
        self.hijacked = taken_over(h)
        self.outages = _outages(h)
        self.published = {o.message_id: o.t_ms for o in h.of(OutboundSettled)
                          if o.state == "PUBLISHED"}
        self.crashes: dict[str, list[float]] = defaultdict(list)
        for x in h.of(NodeCrashed):
            self.crashes[x.node].append(x.t_ms)
        # the duplicate-client-id fault gives its impostor a new client (under the stolen
        # id) at its start, and another (its own again) at its heal
        self.replaced: dict[str, list[float]] = defaultdict(list)
        healed = {e.fault_index: e.t_ms for e in h.of(FaultHealed)}
        for start in h.of(FaultStart):
            impostor = start.params.get("impostor") if isinstance(start.params, dict) else None
            if start.fault == "duplicate_client_id" and isinstance(impostor, str):
                self.replaced[impostor] += [start.t_ms, *(
                    [healed[start.fault_index]] if start.fault_index in healed else [])]
        self.lossy: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for f in h.memo(fault_windows):
            if f.fault == "loss":
                for node in f.nodes:
                    self.lossy[node].append((f.start_ms, f.end_ms))

    def died_with_sender(self, sender: str, t_ms: float, message_id: str) -> bool:
        """The message, sent at `t_ms`, never got its PUBACK and its sender crashed after
        sending it: what its client still held died with the process."""
        return message_id not in self.published and any(t >= t_ms for t in self.crashes[sender])

    def dropped_with_its_client(self, sender: str, t_ms: float, message_id: str) -> bool:
        """The message, sent at `t_ms`, never got its PUBACK and the bench replaced its
        sender's MQTT client after sending it: what the old client held went with it."""
        return message_id not in self.published and any(t >= t_ms for t in self.replaced[sender])

    def stuck_at_sender(self, sender: str, t_ms: float, message_id: str) -> bool:
        """The message, sent at `t_ms`, never got its PUBACK, and its sender's link was
        losing packets then (or had not caught up since): it may still be in the sender's
        TCP retransmission queue, or behind what is."""
        return message_id not in self.published and any(
            start <= t_ms <= _drained(self.h, sender, end) for start, end in self.lossy[sender])

    def out_between(self, node: str, from_ms: float, to_ms: float) -> bool:
        """`node` (or the broker) was out the whole time from `from_ms` to `to_ms`."""
        return any(o.node in (node, EVERY_NODE) and o.start_ms <= from_ms and o.end_ms >= to_ms
                   for o in self.outages)

    def out_until_end(self, node: str, t_ms: float) -> bool:
        """`node` (or the broker) went out around `t_ms` and was still out at the end: what
        it was sending or being sent then may still be on its way."""
        return any(o.node in (node, EVERY_NODE) and o.end_ms >= self.end_ms
                   and o.start_ms <= t_ms + IN_FLIGHT_AT_END_MS for o in self.outages)

    def cut_off_until_end(self, node: str, t_ms: float) -> bool:
        """From about `t_ms` to the end `node` may have heard nothing from the broker: it
        was out, or behind a lossy link its connection had not caught up from."""
        return self.out_until_end(node, t_ms) or any(
            start <= t_ms and _drained(self.h, node, end) >= self.end_ms - IN_FLIGHT_AT_END_MS
            for start, end in self.lossy[node])

    def lost(self, publisher: str, t_ms: float, target: str) -> str | None:
        """Why a message `publisher` had acknowledged at `t_ms` may never have reached
        `target` (a count key), or None: nothing in the journal explains a loss."""
        # the broker took it in at the earliest when the publisher's connection came up (and,
        # unless a lossy link slowed the PUBACK, at most PUBACK_WITHIN_MS before it); the
        # target's subscription took effect again at the latest at its SUBACK. A broker
        # starts with no subscription.
        connected = max([t for t in self.connects[publisher] if t <= t_ms], default=0.0)
        slowed_since = min([start for start, end in self.lossy[publisher]
                            if start <= t_ms <= _drained(self.h, publisher, end)],
                           default=t_ms)
        accepted_from = max(connected, slowed_since - PUBACK_WITHIN_MS)
        # (a target that never subscribed again is not excused: that is a mute receiver)
        for w in self.wipes:
            resubscribed = next((s for s in self.subscribed[target] if s >= w), -math.inf)
            if (w and t_ms <= w) or accepted_from <= resubscribed:
                return "lost_with_non_persistent_broker" if w else "sent_before_the_target_subscribed"
        # what the session still held unacknowledged when it was taken over goes to the
        # new holder too: a message accepted just before the takeover may be among it, and
        # so may one queued for a target that was out from then until the takeover
        if any(start <= t_ms + IN_FLIGHT_AT_END_MS and t_ms <= end + IN_FLIGHT_AT_END_MS
               or (start > t_ms and self.out_between(target, t_ms, start))
               for start, end in self.hijacked[target]):
            return "lost_to_client_id_takeover"
        if self.out_until_end(target, t_ms):
            return "target_out_until_end"
        if any(start <= t_ms and _drained(self.h, target, end) >= accepted_from
               for start, end in self.lossy[target]):
            return "retransmitting_over_a_lossy_link"   # or queued behind what is
        return None


def taken_over(h: History) -> dict[str, list[tuple[float, float]]]:
    """node -> the spans during which another node was connected with its client id, or it
    with another's. MQTT delivers to a client id, not to a node: meanwhile what reaches
    either node may be consumed by the other — the takeover's doing, which the deployment
    checker flags as the cause. A span ends when the borrower's connection does; what is
    lost after that (a broker that mixed the sessions up for good) is not excused."""
    owners = {cid: n for n, cid in h.client_ids.items()}
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    borrowing: dict[str, tuple[str, float]] = {}      # borrower -> (owner, since)

    def close(node: str, t_ms: float) -> None:
        if node in borrowing:
            owner, since = borrowing.pop(node)
            spans[owner].append((since, t_ms))
            spans[node].append((since, t_ms))

    events: list[Event] = sorted([*h.of(MqttConnected), *h.of(MqttDisconnected)],
                                 key=lambda e: e.seq)
    for e in events:
        close(e.node, e.t_ms)
        if isinstance(e, MqttConnected):
            owner = owners.get(e.client_id)
            if owner is not None and owner != e.node:
                borrowing[e.node] = (owner, e.t_ms)
    for node in list(borrowing):
        close(node, h.end_ms)
    return spans


def _no_request(h: History) -> str | None:
    return None if h.of(RequestSent) else "no request was sent in this run"


def _nothing_targeted(h: History) -> str | None:
    sent = any(e.message_type != "EVENT" and e.state in ("PUBLISHED", "LOCAL_CONSUMED")
               for e in h.of(OutboundSettled))
    return None if sent or h.of(InboundAdmitted) else "no targeted message went anywhere"


def _no_response(h: History) -> str | None:
    return None if _responses(h) else "no task response was sent in this run"


def _nothing_published(h: History) -> str | None:
    published = any(e.state == "PUBLISHED" and e.message_type != "EVENT"
                    for e in h.of(OutboundSettled))
    return None if published else "no targeted message was published to the broker"


SILENT_LOSS = Checker(
    "silent_loss", "Every request ends in exactly one outcome, and a request that got no "
    "response has an exact explanation in the history; every drop gives its true reason.",
    (settles_once, no_response_explained, no_response_not_early, drops_are_true), _no_request)
TARGETED_DELIVERY = Checker(
    "targeted_delivery", "Targeted messages are published to a real node's inbox (never the "
    "sender's own: that is consumed locally), consumed only by the node they address, and "
    "never executed across namespaces.",
    (published_to_a_node, own_messages_stay_local, consumed_by_addressee, no_foreign_namespace),
    _nothing_targeted)
REPLY_ROUTING = Checker(
    "reply_routing", "A TASK_RESPONSE goes to the request's headers.replyNodeId with the "
    "requestId echoed; without replyNodeId: a warning and an UNDELIVERABLE response.",
    (response_echoes_request, response_to_reply_node, missing_reply_node_explicit),
    _no_response)
@rule("MQTT 3.1.1 §3.2.2.2 (Session Present), §4.1 (session state); DESIGN §10")
def session_kept_as_promised(h: History, c: Collector) -> None:
    """A node that connects again with its client id finds its persistent session there
    (sessionPresent), unless something in between lost it: a broker restart that keeps
    nothing (no persistence, or amqtt, which has none), a broker outage no fault made
    (what it keeps is unknown), or another client holding the client id meanwhile. A
    broker that promised persistence and came back without the session (Mosquitto unable
    to write its file), or a node that asked for a clean session, loses the QoS1 state
    at-least-once delivery rests on."""
    transit = h.memo(Transit)
    wipes = [*transit.wipes[1:],
             *(f.t_ms for f in h.of(FaultFired) if f.action.startswith(BROKER_DOWN)
               and isinstance(f.details, dict) and f.details.get("brokerPersistence")
               in ("none", "unknown")),
             *(d.t_ms for d in h.of(BrokerDown) if not d.planned)]
    last: dict[tuple[str, str], MqttConnected] = {}
    for m in sorted(h.of(MqttConnected), key=lambda e: e.seq):
        key = (m.node, m.client_id)
        before = last.get(key)
        last[key] = m
        if before is None:
            continue    # the first session of the run: nothing to find yet
        c.count("reconnects")
        if m.session_present:
            c.count("session_present")
            continue
        if any(before.t_ms <= t <= m.t_ms for t in wipes):
            c.count("session_lost_with_the_broker")
        elif any(s < m.t_ms and e > before.t_ms for s, e in transit.hijacked.get(m.node, [])):
            c.count("session_taken_over")
        else:
            c.violation(f"{m.node} connected again as {m.client_id} at {m.t_ms:.0f} ms and "
                        f"found no session (sessionPresent=false); nothing since its "
                        f"connection at {before.t_ms:.0f} ms lost it", before, m)


@rule("MQTT 3.1.1 §3.3.1.1 [MQTT-3.3.1-1] (DUP on re-delivery), §4.4 [MQTT-4.4.0-1]")
def redelivery_marked_dup(h: History, c: Collector) -> None:
    """A PUBLISH the broker sends again on a resumed session — the same message under the
    same packet id a copy came with on an earlier connection of the same client id — is a
    re-delivery, and MUST carry DUP=1. A broker that re-sends with DUP=0 tells the client
    "new message": a client that trusts the flag (or a bridge that counts on it) takes the
    copy for a second publication. Copies of a second connection (double_subscription)
    come from another session's packet ids and are not judged."""
    second = {f.node for f in h.of(FaultFired) if f.fault == "double_subscription"
              and f.action == "delivered on the second connection"}
    connection: dict[str, tuple[int, str, bool]] = {}   # node -> (number, client id, present)
    seen: dict[tuple[str, str, int], tuple[int, str, Event]] = {}
    timeline: list[MqttConnected | InboundAdmitted | InboundDropped] = [
        *h.of(MqttConnected), *h.of(InboundAdmitted), *h.of(InboundDropped)]
    for e in sorted(timeline, key=lambda e: e.seq):
        if isinstance(e, MqttConnected):
            number = connection.get(e.node, (0, "", False))[0] + 1
            connection[e.node] = (number, e.client_id, e.session_present)
            continue
        if e.packet_id is None or not e.qos or e.message_id is None or e.node in second:
            continue
        number, client_id, present = connection.get(e.node, (0, "", False))
        key = (e.node, e.message_id, e.packet_id)
        first = seen.setdefault(key, (number, client_id, e))
        if first[0] == number or first[1] != client_id or not present:
            continue    # the same connection, another client id, or a session begun anew
        c.count("redelivered_on_a_resumed_session")
        if e.dup:
            c.count("redelivered_with_dup")
        else:
            c.violation(f"{e.node} got {e.message_id} again as packet {e.packet_id} on its "
                        f"resumed session ({client_id}, connection {number}) with DUP=0: a "
                        f"re-delivery of the copy it got on connection {first[0]}", first[2], e)


QOS1_DELIVERY = Checker(
    "qos1_delivery", "QoS1 on a persistent session is at least once: every targeted message "
    "the broker accepted reaches the node it addresses, a reconnecting node finds its "
    "session, and a re-delivery is marked DUP.",
    (published_reaches_addressee, session_kept_as_promised, redelivery_marked_dup),
    _nothing_published)
