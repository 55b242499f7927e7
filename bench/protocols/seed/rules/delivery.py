"""Delivery (DESIGN §3–§4, §7; seed 002 §3–§5): no silent loss, targeted delivery, reply
routing, QoS1 at-least-once."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from bench.checks import Checker, Collector, rule
from bench.checks.network import (
    BROKER_DOWN,
    EVERY_NODE,
    Transit,
    clocks,
    fault_windows,
    ghosts,
    restored_settled,
    sent_where_redirected,
    tampered,
)
from bench.checks.network import (
    settled as _settled,
)
from bench.checks.terms import (
    CLOCK_SLACK_MS,
    DEFAULT_EXECUTOR,
    IN_FLIGHT_AT_END_MS,
    MALFORMED_ENVELOPE,
    NOT_SENT,
    TARGETED,
    TASK_ENDS,
    records_late_ms,
)
from bench.core.events import (
    AttackSent,
    BrokerDown,
    DropReason,
    Event,
    ExecutorsRegistered,
    FaultAction,
    FaultFired,
    FaultStart,
    GateDecisionSent,
    GateOpenSent,
    InboundAdmitted,
    InboundDropped,
    MessageType,
    MqttConnected,
    NodeCrashed,
    NodeStarted,
    NodeWarning,
    OutboundSettled,
    OutboundState,
    RelaySent,
    RequestOutcome,
    RequestSent,
    RequestSettled,
    ResponseUnmatched,
    RosterLoaded,
    SignatureVerdict,
    TaskExecuted,
    TaskState,
    WarningKind,
)
from bench.history import History
from bench.protocols.seed.rules.directory import Directories
from bench.protocols.seed.rules.inbound import drops


def _namespace(agent_id: str) -> str:
    """DESIGN §3: an agentId is `namespace.capability`."""
    return agent_id.split(".", 1)[0]


def _inbox_of(topic: str | None) -> str | None:
    """The node a targeted topic `{prefix}/node/{nodeId}/inbox` addresses, read from its
    shape (DESIGN §3 Topics), else None."""
    parts = (topic or "").split("/")
    return parts[-2] if len(parts) >= 4 and parts[-3] == "node" and parts[-1] == "inbox" else None


# -- silent loss ------------------------------------------------------------------------------------
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




def _target_of(h: History) -> dict[str, str]:
    """requestId -> the node its TASK_REQUEST was published to: the node it addressed, or
    else the inbox its topic names."""
    target: dict[str, str] = {}
    for o in h.of(OutboundSettled):
        node = o.target_node_id or _inbox_of(o.topic)
        if o.request_id and o.message_type == MessageType.TASK_REQUEST and node:
            target[o.request_id] = node
    return target




def _still_running(h: History) -> dict[str, float]:
    """requestId (the taskId it started: DESIGN §3) -> when the last of its executions ended
    (inf: one never did), for every request some node executed. Keyed by the task, not the
    messageId: a forgery sent ahead under a request's messageId runs a task of its own,
    which must not stand for the genuine one (explore, seed 11 run 1943)."""
    ended: dict[tuple[str, str], float] = {}
    for t in h.of(TaskState):
        if t.state in TASK_ENDS:
            ended.setdefault((t.node, t.task_id), t.t_ms)
    last: dict[str, float] = {}
    for x in h.of(TaskExecuted):
        last[x.task_id] = max(last.get(x.task_id, -math.inf),
                              ended.get((x.node, x.task_id), math.inf))
    return last


def shadowed_by_a_forgery(h: History) -> set[str]:
    """The genuine requests dropped as a DUPLICATE by their target because a forgery sent
    ahead under their messageId had been admitted there (no auth to refuse it), or had
    reached it and been dropped NOT_MINE (ledgered all the same): rightly a
    duplicate of it, the attack's doing. (A forgery refused explains no such drop:
    refusal_leaves_no_trace judges a ledger it poisoned.) Forgeries are (messageId,
    requestId) pairs, not a messageId -> requestId map: a tampering of the genuine request
    journals the same messageId under the genuine requestId, and must not hide the
    forgery's."""
    message_of = {s.request_id: s.message_id for s in h.of(RequestSent)}
    forged = {(a.message_id, a.request_id) for a in h.of(AttackSent)
              if a.message_id and a.request_id and a.request_id not in message_of}
    admitted = {(i.node, i.message_id) for i in h.of(InboundAdmitted)
                if (i.message_id, i.request_id) in forged}
    # a forgery for another node that reached this one (a client id it borrowed) and was
    # dropped NOT_MINE went through its ledger too: the genuine request is its duplicate
    admitted |= {(d.node, d.message_id) for d in drops(h)
                 if d.reason == DropReason.NOT_MINE and d.message_id is not None
                 and (d.message_id, d.request_id) in forged}
    target = h.memo(_target_of)
    return {d.request_id for d in drops(h)
            if d.request_id and d.reason == DropReason.DUPLICATE
            and d.node == target.get(d.request_id)
            and (d.node, message_of.get(d.request_id)) in admitted}


@rule("DESIGN §7 no silent loss; seed 000 §3.3 (a mute receiver loses requests silently)")
def no_response_explained(h: History, c: Collector) -> None:
    """A request that got no response has an exact explanation in the history: its send
    or its response's ended UNDELIVERABLE or FAILED; the request or its response was
    dropped, with a reason other than DUPLICATE, by the node it reached, or lost by the
    network as the journal explains (Transit); or the requester,
    the target or the broker was out (down, cut off, slowed, taken over) during its
    lifetime; or the task it started was still running when the requester gave up, or
    its response reached the requester after that (it shows as unmatched); or a man in
    the middle rewrote its replyNodeId (the answer went to him); or a forgery under its
    messageId was sent ahead and admitted, so the request was a DUPLICATE of it. Otherwise
    it was lost silently."""
    target = h.memo(_target_of)
    explained: set[str] = set()
    transit = h.memo(Transit)
    for o in h.of(OutboundSettled):
        if o.request_id and o.state in NOT_SENT:
            explained.add(o.request_id)
        elif o.request_id and o.state == OutboundState.PUBLISHED and o.target_node_id and \
                o.message_type in (MessageType.TASK_REQUEST, MessageType.TASK_RESPONSE) and \
                transit.lost(o.node, o.t_ms, o.target_node_id) is not None:
            explained.add(o.request_id)   # the network lost it, as the journal explains
    # an attacker rewrote the request's replyNodeId: its answer went where he sent it
    explained |= h.memo(tampered)
    # an attacker planted a ghost the request was queued for, as W-DIR-5 says: nobody reads
    # its inbox
    planted, queued = h.memo(ghosts), h.fold(Directories).queued_offline
    explained |= {o.request_id for o in h.of(OutboundSettled)
                  if o.request_id and o.target_node_id in planted and o.seq in queued}
    requesters = {s.request_id: s.node for s in h.of(RequestSent)}
    explained |= h.memo(shadowed_by_a_forgery)
    for d in drops(h):
        rid = d.request_id
        if rid and d.reason != DropReason.DUPLICATE \
                and d.node in (target.get(rid), requesters.get(rid)):
            explained.add(rid)
    outages = transit.outages
    task_ended = _still_running(h)
    settled = _settled(h)
    # the response came, after the requester had given up: slow, not lost. (Before it gave
    # up, a response it could not match is the requester's fault, and explains nothing.)
    # Both are the requester's events: the history's order says which came first, where
    # milliseconds called one it could not match in the millisecond it gave up late
    late = {(u.node, u.request_id) for u in h.of(ResponseUnmatched) if u.request_id
            and any(s.seq < u.seq for s in settled.get((u.node, u.request_id), []))}
    for sent in h.of(RequestSent):
        outcomes = settled.get((sent.node, sent.request_id), [])
        if not outcomes or outcomes[0].outcome != RequestOutcome.NO_RESPONSE:
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
        if task_ended.get(sent.request_id, -1.0) > outcome.t_ms:
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
    a message the node sent itself (it settled it, or another node took it in from it) —
    an attacker's only where its originNodeId claims the node (forged_sender claims=target
    sends one claiming the node's own agent from another node: scenario forged_as_itself); a
    request addressed to the node is NOT_MINE only for an agent it had not registered (its
    roster and executors, since it last started; one addressed elsewhere reached it through
    a borrowed client id); nothing the bench sends is MALFORMED but what the
    malformed_envelope fault sends (judged by robustness)."""
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
    # what a node decided to send, settled or not: a stream's frame, a gate it opened, a
    # decision — a PUBACK lost with a replaced client leaves no settlement behind
    made = [(e.node, e.message_id) for e in h.of(RequestSent)]
    made += [(e.node, e.message_id) for e in h.of(RelaySent)]
    made += [(e.node, e.message_id) for e in h.of(GateOpenSent)]
    made += [(e.node, e.message_id) for e in h.of(GateDecisionSent)]
    for node, message_id in made:
        sent_by[message_id].add(node)
    attacks = {a.message_id for a in h.of(AttackSent)}   # forged or replayed: judged by auth
    claimed = {a.message_id: a.claimed_node for a in h.of(AttackSent) if a.claimed_node}
    # a message another node took in from its origin was sent by it, settled or not: its
    # sender may have crashed, or lost its client, before the PUBACK came
    for got in h.of(InboundAdmitted):
        if got.origin_node_id is not None and got.message_id not in attacks:
            sent_by[got.message_id].add(got.origin_node_id)
    seen: set[tuple[str, str]] = set()
    agents: dict[str, set[str]] = defaultdict(set)
    crashes: dict[str, list[float]] = defaultdict(list)
    # what the malformed_envelope fault sent each node, some of it with no messageId a node
    # can read: a MALFORMED drop of no id is one of them (judged by robustness)
    unread: dict[str, int] = defaultdict(int)
    events: list[Event] = sorted([*h.of(InboundAdmitted), *drops(h),
                                  *h.of(NodeStarted), *h.of(NodeCrashed), *h.of(RosterLoaded),
                                  *h.of(ExecutorsRegistered), *h.of(AttackSent)],
                                 key=lambda e: e.seq)
    for e in events:
        match e:
            case AttackSent():
                if e.attack == MALFORMED_ENVELOPE and e.target_node_id is not None:
                    unread[e.target_node_id] += 1
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
                    # a forgery's SELF_LOOP is true only where its originNodeId claims the node
                    origin = claimed.get(mid)
                    if e.reason == DropReason.SELF_LOOP and origin is not None \
                            and origin != e.node:
                        c.violation(f"{e.node} dropped the attacker's {mid} as its own message "
                                    f"(SELF_LOOP), though it claims to come from {origin}", e)
                    continue
                if e.reason == DropReason.MALFORMED and not mid and unread[e.node] > 0:
                    unread[e.node] -= 1
                    continue
                if e.reason == DropReason.MALFORMED:
                    c.violation(f"{e.node} dropped {mid or 'a message'} as MALFORMED "
                                f"({e.detail}): nothing the bench sends is", e)
                elif e.reason == DropReason.SELF_LOOP and e.node not in sent_by.get(mid, set()):
                    c.violation(f"{e.node} dropped {mid} as its own message (SELF_LOOP) but "
                                "never sent it", e)
                elif e.reason == DropReason.DUPLICATE and not before and not any(
                        first_sent.get(mid, -math.inf) <= t <= e.t_ms for t in crashes[e.node]):
                    c.violation(f"{e.node} dropped {e.message_type} {mid} as a DUPLICATE it "
                                "had never had", e)
                elif e.reason == DropReason.NOT_MINE \
                        and e.message_type == MessageType.TASK_REQUEST \
                        and target.get(mid) == e.node and to_agent.get(mid) in agents[e.node]:
                    c.violation(f"{e.node} refused {mid} for {to_agent[mid]} as NOT_MINE "
                                "although it had registered that agent", e)




@rule("DESIGN §3 Tasks: the requester's future times out after its timeout, not before")
def no_response_not_early(h: History, c: Collector) -> None:
    """A request is given up (NO_RESPONSE) only once its timeout has passed, never
    before: early on the requester's own clock and on the bench's both. (A clock set off
    during the request moves the first, as it would a real node's wall clock, while its
    timers keep real time; on the bench's, each of the two records may be stamped up to
    the substrate's records_late_ms after the node decided.)"""
    sent = {(s.node, s.request_id): s for s in h.of(RequestSent)}
    slack = CLOCK_SLACK_MS + records_late_ms(h)
    for e in h.of(RequestSettled):
        s = sent.get((e.node, e.request_id))
        if e.outcome == RequestOutcome.NO_RESPONSE and s is not None \
                and e.latency_ms < s.timeout_ms \
                and e.t_ms - s.t_ms < s.timeout_ms - slack:
            c.violation(f"request {e.request_id} gave up after {e.latency_ms} ms, before its "
                        f"{s.timeout_ms} ms timeout", s, e)


# -- targeted delivery --------------------------------------------------------------------------------
@rule("DESIGN §3 Topics and Outbound; seed 000 §2.2 (toAgentId used as nodeId)")
def published_to_a_node(h: History, c: Collector) -> None:
    """A targeted message is published to the inbox of the node it addresses, and that
    address is a node of the deployment — unless a man in the middle gave it that address
    (what answers a request whose replyNodeId he rewrote goes to his node: the response,
    the streamed frames, the gate it opens), or an attacker planted it as a gone node's
    retained announcement the sender had no way to tell from a node away (W-DIR-5)."""
    nodes = h.nodes
    planted = h.memo(ghosts)
    queued = h.fold(Directories).queued_offline
    for e in h.of(OutboundSettled):
        if e.state != OutboundState.PUBLISHED or e.message_type == MessageType.EVENT:
            continue
        c.count("targeted_published")
        target = e.target_node_id
        if target not in nodes and sent_where_redirected(h, e.node, target, e.t_ms):
            c.count("sent_where_an_attacker_redirected_it")
        elif target in planted and e.seq in queued:
            # a ghost the attack planted, the only entry listing the agent, and the sender
            # never saw a live holder go offline: W-DIR-5 queues there (explore, seed 14
            # run 1440: the orchestrator restarted as the live holder switched namespaces)
            c.count("queued_for_a_planted_ghost_as_w_dir_5_says")
        elif target not in nodes:
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
        if e.state == OutboundState.PUBLISHED:
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
        if e.message_type != MessageType.TASK_REQUEST:
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
        if e.message_type == MessageType.TASK_REQUEST and e.request_id:
            requests.setdefault((e.node, e.request_id), e)
    return requests


def _responses(h: History) -> list[OutboundSettled]:
    return [e for e in h.of(OutboundSettled) if e.message_type == MessageType.TASK_RESPONSE]


@rule("DESIGN §3 Tasks: headers.requestId echoed")
def response_echoes_request(h: History, c: Collector) -> None:
    """Every TASK_RESPONSE carries the requestId of the request it answers."""
    for e in _responses(h):
        c.count("responses")
        if not e.request_id:
            c.violation(f"response {e.message_id} does not echo a requestId", e)


#: How long after a task ended its response may still be in the executor's client: a crash
#: that soon may have taken it (an outbound is recorded once it settles).
ANSWER_IN_FLIGHT_MS = 2_000


@rule("DESIGN §3 Tasks: a task found RUNNING after a restart ends FAILED(\"interrupted\") "
      "and the requester is told; every end is answered")
def ended_task_answered(h: History, c: Collector) -> None:
    """Every task an executor ended — COMPLETED, FAILED (an interrupted one too, after a
    restart), TIMEOUT — answers its requester: a TASK_RESPONSE for its requestId leaves that
    executor, settled one way or the other (published, consumed locally, or explicitly
    UNDELIVERABLE or FAILED), or seen arriving where it went. A requester's timeout, or a
    restart overlapping the request, does not excuse an executor that decided the task and
    never said so. Excused: an end
    whose response may have died in the executor's MQTT client — the process crashed, or
    the bench replaced its client (duplicate-client-id), within ANSWER_IN_FLIGHT_MS of the
    end or after an outage that held the response since; undecided: an executor cut off
    from then to the end, and an end in the run's last moments (its response on its way)."""
    answered = {(o.node, o.request_id) for o in h.of(OutboundSettled)
                if o.message_type == MessageType.TASK_RESPONSE and o.request_id}
    # a response some node took in from the executor left it, settled there or not (its
    # PUBACK held by a partition, then the process restarted: explore, seed 14 run 1555)
    arrived = {(a.origin_node_id, a.request_id) for a in h.of(InboundAdmitted)
               if a.message_type == MessageType.TASK_RESPONSE and a.request_id}
    transit = h.memo(Transit)
    ended: dict[tuple[str, str], TaskState] = {}
    for t in h.of(TaskState):
        if t.state in TASK_ENDS:
            ended.setdefault((t.node, t.task_id), t)
    for (node, task_id), end in sorted(ended.items()):
        c.count("ended")
        if (node, task_id) in answered:
            c.count("answered")
        elif (node, task_id) in arrived:
            c.count("answer_arrived_unsettled")
        elif any(t >= end.t_ms and (t <= end.t_ms + ANSWER_IN_FLIGHT_MS
                                    or transit.out_between(node, end.t_ms, t))
                 for t in [*transit.crashes[node], *transit.replaced[node]]):
            c.count("answer_died_with_its_executors_client")
        elif transit.cut_off_until_end(node, end.t_ms):
            c.unknown("executor_cut_off_until_the_end")
        elif end.t_ms > h.end_ms - IN_FLIGHT_AT_END_MS:
            c.unknown("ended_at_the_end")
        else:
            c.violation(f"{node} ended task {task_id} {end.state}"
                        + (f" ({end.error})" if end.error else "")
                        + " and never answered its requester", end)


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
    warned = {(w.node, w.task_id) for w in h.of(NodeWarning)
              if w.what is WarningKind.MISSING_REPLY_NODE}
    for e in _responses(h):
        req = requests.get((e.node, e.request_id)) if e.request_id else None
        if req is None or req.reply_node_id:
            continue
        ok_warned = (e.node, e.request_id) in warned
        if e.state != OutboundState.UNDELIVERABLE or not ok_warned:
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
    for d in drops(h):
        if d.message_id:
            seen.add((d.node, d.message_id))
    transit = h.memo(Transit)
    nodes = h.nodes
    for e in h.of(OutboundSettled):
        if e.state != OutboundState.PUBLISHED or e.message_type == MessageType.EVENT:
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


def _no_request(h: History) -> str | None:
    return None if h.of(RequestSent) else "no request was sent in this run"


def _nothing_targeted(h: History) -> str | None:
    sent = any(e.message_type != MessageType.EVENT
               and e.state in (OutboundState.PUBLISHED, OutboundState.LOCAL_CONSUMED)
               for e in h.of(OutboundSettled))
    return None if sent or h.of(InboundAdmitted) else "no targeted message went anywhere"


def _no_response(h: History) -> str | None:
    return None if _responses(h) else "no task response was sent in this run"


def _nothing_published(h: History) -> str | None:
    published = any(e.state == OutboundState.PUBLISHED and e.message_type != MessageType.EVENT
                    for e in h.of(OutboundSettled))
    return None if published else "no targeted message was published to the broker"


#: How many requests make "not one got through" a class of work failing, not bad luck.
WHOLE_CLASS = 3
#: Faults that make a node's publishes fail on purpose (its client, or the broker's PUBACK)
REFUSING_FAULTS = frozenset({"publish_failure", "puback_refused"})
#: The outcomes a requester settles on when an executor's answer came back.
ANSWERED_OUTCOMES = frozenset({RequestOutcome.COMPLETED, RequestOutcome.FAILED,
                               RequestOutcome.TIMEOUT, RequestOutcome.CANCELLED})


@rule("DESIGN §7 (a check that cannot fail is worthless): a run's work gets through")
def driven_requests_get_through(h: History, c: Collector) -> None:
    """A run that drives requests gets some of them through: if the workload sent requests
    and not one was executed by an agent (or answered), a whole class of work failed — no
    signature verifying, a reconnected node that never subscribes again, a roster nobody
    can reach — and that is FALSE with the count, not "nothing to judge" for every checker
    that would have judged the tasks. (A workload whose tasks run and then wait for people
    who never decide does get through.) Judged from WHOLE_CLASS requests on; undecided: a
    run that ended before any request could end. Not counted: a request to an agent no
    node had registered when it was sent (the workload's unknown agents, a topology with
    no executor, a node down, or one a fault restarted without its agents), one that named
    a node not hosting its agent (the workload's misaddressed requests), one an admitted forgery
    under its messageId made a duplicate (shadowed_by_a_forgery), one that failed to send
    while a fault made the client or the broker refuse the requester's publishes, or that
    admission refused for a fault's doing (a node a key rotation left with the old keys on
    purpose; STALE on a clock a clock_skew fault set off), and one
    sent while the broker, or the requester's own connection, was out (Transit)."""
    every = h.of(RequestSent)
    # walk registrations and requests in history order: the agents each node has
    # registered in its current boot, and how many nodes host each agent now
    current: dict[str, list[str]] = {}
    hosts: Counter[str] = Counter()
    sent: list[RequestSent] = []
    shadowed = h.memo(shadowed_by_a_forgery)
    refusing = [f for f in h.memo(fault_windows) if f.fault in REFUSING_FAULTS]
    send_failed = {e.request_id for e in h.of(RequestSettled)
                   if e.outcome == RequestOutcome.SEND_FAILED}
    transit = h.memo(Transit)
    # a key rotation that left a node with the old keys on purpose (its stale_node): that
    # node refusing what is signed under the new ones is the fault's doing (explore, seed 19
    # runs 417 and 643: every request went to the one executor left stale)
    stale = {str(f.params["stale_node"]) for f in h.of(FaultStart)
             if f.fault == "key_rotation" and isinstance(f.params, dict)
             and f.params.get("stale_node")}
    refused_by_a_fault = {d.request_id for d in drops(h)
                     if d.reason == DropReason.AUTH_REJECTED and d.node in stale and d.request_id}
    # and a clock a clock_skew fault set off, the sender's when it signed or the target's
    # when it judged: what it called STALE is the fault's doing (explore, seed 34 run 66: a
    # requester 400 s ahead, every request it sent meanwhile refused STALE)
    seen, sent_at = h.memo(clocks), {r.request_id: (r.node, r.t_ms) for r in every}
    refused_by_a_fault |= {d.request_id for d in drops(h)
                      if d.reason == DropReason.AUTH_REJECTED and d.request_id
                      and d.verdict == SignatureVerdict.STALE
                      and (seen.off(d.node, d.t_ms)
                           or seen.off(*sent_at.get(d.request_id, ("", 0.0))))}
    misaddressed = forged_ahead = refused = cut_off = refused_for_a_fault = 0
    for e in sorted([*h.of(ExecutorsRegistered), *h.of(NodeCrashed), *every],
                    key=lambda e: e.seq):
        if isinstance(e, ExecutorsRegistered):
            hosts.subtract(current.get(e.node, []))
            current[e.node] = list(e.agents)
            hosts.update(e.agents)
        elif isinstance(e, NodeCrashed):
            # down, it hosts nothing until it registers again (explore, seed 7 run 1499:
            # requests while a stale roster's restart had exec-1 down ended UNDELIVERABLE,
            # rightly, and counted as work that failed by itself)
            hosts.subtract(current.pop(e.node, []))
        elif isinstance(e, RequestSent) and hosts[e.to_agent_id] > 0:
            if e.target_node_id and e.to_agent_id not in current.get(e.target_node_id, ()):
                misaddressed += 1       # it named a node that does not host its agent
            elif e.request_id in shadowed:
                forged_ahead += 1
            elif e.request_id in send_failed and any(
                    e.node in f.nodes and f.start_ms <= e.t_ms <= f.end_ms for f in refusing):
                refused += 1            # a fault made the client or the broker refuse it
            elif transit.out_between(e.node, e.t_ms, e.t_ms):
                cut_off += 1            # the broker, or the requester's link, was out
            elif e.request_id in refused_by_a_fault:
                refused_for_a_fault += 1    # a key rotation's stale node, a skewed clock
            else:
                sent.append(e)
    c.count("to_an_agent_no_node_hosted", len(every) - len(sent) - misaddressed - forged_ahead
            - refused - cut_off - refused_for_a_fault)
    c.count("to_a_node_not_hosting_its_agent", misaddressed)
    c.count("shadowed_by_an_admitted_forgery", forged_ahead)
    c.count("refused_at_send_by_a_fault", refused)
    c.count("sent_while_the_requester_or_the_broker_was_out", cut_off)
    if refused_for_a_fault:   # (only then: every other run's verdicts stay byte for byte)
        c.count("refused_for_a_key_or_a_clock_a_fault_set", refused_for_a_fault)
    ids = {s.request_id for s in sent}
    executed = {e.task_id for e in h.of(TaskExecuted)} & ids
    answered = {o.request_id for o in h.of(OutboundSettled)
                if o.message_type == MessageType.TASK_RESPONSE and o.request_id in ids}
    # a requester that settled on an executor's answer (its response came back)
    answered |= {rid for (_node, rid), got in _settled(h).items()
                 if got[0].outcome in ANSWERED_OUTCOMES}
    c.count("requests_sent", len(sent))
    c.count("got_through", len(executed | answered))
    if executed or answered:
        return
    if len(sent) < WHOLE_CLASS:
        c.count("too_few_requests_to_judge")
        return
    settled = _settled(h)
    if not settled and all(s.t_ms + s.timeout_ms > h.end_ms for s in sent):
        c.unknown("no_request_could_end_yet")
        return
    outcomes = Counter(o[0].outcome for o in settled.values())
    c.violation(f"{len(sent)} requests sent and not one executed or answered ("
                + ", ".join([f"{k} {n}" for k, n in sorted(outcomes.items())]
                            + [f"{len(sent) - sum(outcomes.values())} unsettled"]) + ")",
                sent[0])


SILENT_LOSS = Checker(
    "silent_loss", "Every request ends in exactly one outcome, and a request that got no "
    "response has an exact explanation in the history; every drop gives its true reason; "
    "a run that drives requests gets some through.",
    (settles_once, no_response_explained, no_response_not_early, drops_are_true,
     driven_requests_get_through), _no_request)
TARGETED_DELIVERY = Checker(
    "targeted_delivery", "Targeted messages are published to a real node's inbox (never the "
    "sender's own: that is consumed locally), consumed only by the node they address, and "
    "never executed across namespaces.",
    (published_to_a_node, own_messages_stay_local, consumed_by_addressee, no_foreign_namespace),
    _nothing_targeted)
REPLY_ROUTING = Checker(
    "reply_routing", "A TASK_RESPONSE goes to the request's headers.replyNodeId with the "
    "requestId echoed; without replyNodeId: a warning and an UNDELIVERABLE response.",
    (response_echoes_request, response_to_reply_node, missing_reply_node_explicit,
     ended_task_answered), _no_response)
@rule("MQTT 3.1.1 §3.2.2.2 (Session Present), §4.1 (session state); DESIGN §10")
def session_kept_as_promised(h: History, c: Collector) -> None:
    """A node that connects again with its client id finds its persistent session there
    (sessionPresent), unless something in between lost it: a broker restart that keeps
    nothing (no persistence, or amqtt, which has none), a broker outage no fault made
    (what it keeps is unknown), or another client holding the client id meanwhile. A
    broker that promised persistence and came back without the session (Mosquitto unable
    to write its file), or a node that asked for a clean session, loses the QoS1 state
    at-least-once delivery rests on. On MQTT 5 a node away longer than the Session Expiry
    Interval it asked for finds none, as it should (deployment judges the converse)."""
    transit = h.memo(Transit)
    wipes = [*transit.wipes[1:],
             *(f.t_ms for f in h.of(FaultFired) if f.action in BROKER_DOWN
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
        elif any(a.back is m and a.may_have_expired for a in transit.aways[m.node]):
            c.count("session_expired")      # MQTT 5: away longer than its Session Expiry
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
              and f.action == FaultAction.SECOND_CONNECTION_DELIVERY}
    connection: dict[str, tuple[int, str, bool]] = {}   # node -> (number, client id, present)
    seen: dict[tuple[str, str, int], tuple[int, str, Event]] = {}
    timeline: list[MqttConnected | InboundAdmitted | InboundDropped] = [
        *h.of(MqttConnected), *h.of(InboundAdmitted), *drops(h)]
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
