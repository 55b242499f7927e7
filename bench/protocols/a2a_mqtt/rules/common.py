"""What the A2A-over-MQTT rules share: the profile's numbers, and what requesters and responders took in and sent out — their own records, or their wire (folds every checker reads)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from bench.checks import Collector
from bench.checks.network import Transit, fault_windows, held_until
from bench.core.events import (
    A2mAttempt,
    A2mReplied,
    A2mReplyTaken,
    A2mRequestTaken,
    AttackSent,
    Event,
    ExecutorsRegistered,
    FaultHealed,
    FaultStart,
    Intake,
    NodeCrashed,
    NodeStarted,
    ReplyKind,
    RunStarted,
    TaskExecuted,
    Wire,
)
from bench.history import History

#: A2M-RETRY-1's defaults, as the bench's requester uses them
REPLY_FIRST_MS = 15_000.0


#: The task states that end a correlation's stream (A2M-STREAM-2, A2M-STREAM-3).
FINAL_STATES = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
                          "TASK_STATE_REJECTED", "TASK_STATE_INPUT_REQUIRED",
                          "TASK_STATE_AUTH_REQUIRED"})


#: The task states no task leaves (A2A v1.0's terminal states).
TERMINAL_STATES = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
                             "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"})


#: How early an attempt may come against the profile's wait (whole-ms clocks, a timer's
#: slack): the same allowance the seed's watchdog rules give.
EARLY_MS = 50.0


#: The profile's request and discovery topics (A2M-TOPIC-1), read here on their own
REQUEST_PREFIX, DISCOVERY_PREFIX = "$a2a/v1/request/", "$a2a/v1/discovery/"


# -- what responders took in and sent out: their own records, or their wire ----------------------
@dataclass(frozen=True, slots=True)
class Took:
    """A request a responder took in: from its own record (A2mRequestTaken), or, for an
    agent that keeps none (one not written here, judged from its wire tap), from the
    PUBLISH the broker handed it. `refused`: None where only the wire tells."""

    node: str
    t_ms: float
    topic: str
    correlation: str | None
    response_topic: str | None
    task_id: str | None
    refused: bool | None
    event: Event
    context_id: str | None = None
    method: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """A reply or stream item a responder published: its own record (A2mReplied), or the
    PUBLISH its wire tap saw leave it."""

    node: str
    t_ms: float
    topic: str
    correlation: str | None
    kind: str           # RESULT, ERROR, STATUS, ARTIFACT; "REPLY" off the wire
    final: bool         # an error, or a status or Task whose state ends the correlation's
                        # stream (a Task still WORKING answers a retry and does not end it;
                        # an artifact chunk ends nothing, whatever state its task is in)
    task_id: str | None
    event: Event
    state: str | None = None          # the task state it carries
    context_id: str | None = None     # the contextId it carries


@dataclass(frozen=True, slots=True)
class Asked:
    """A request a requester published: its own record (A2mAttempt), or, for one that keeps
    none (written elsewhere, judged from its wire tap), the PUBLISH the tap saw leave it."""

    node: str
    t_ms: float
    topic: str
    correlation: str | None
    response_topic: str | None
    method: str | None
    task_id: str | None
    context_id: str | None
    event: Event
    #: off the tap, a property_tampering fault on its link acted on it: the Correlation
    #: Data here is the one it was sent with (an altered one's mark removed), or None for
    #: one the fault stripped
    tampered: bool = False
    #: it carried a bearer token in a2a-authorization (None: its record does not say)
    bearer: bool | None = None


@dataclass(frozen=True, slots=True)
class Heard:
    """A reply a requester received on its reply topic: its own record (A2mReplyTaken), or
    the PUBLISH its wire tap saw reach it. `code`: a JSON-RPC error's; `state`: the task
    state it carried."""

    node: str
    t_ms: float
    topic: str
    correlation: str | None
    code: int | None
    state: str | None
    event: Event
    #: the agent its a2a-responder-agent-id named (a pool's member, a task's delegate)
    named: str | None = None


def _askers(h: History) -> set[str]:
    """The requesters that record their attempts (the bench's reference)."""
    return {a.node for a in h.of(A2mAttempt)}


def asked(h: History) -> list[Asked]:
    """Every request a requester published, in history order."""
    own = h.memo(_askers)
    replies = h.memo(_reply_topics)
    out: list[tuple[int, Asked]] = [
        (a.seq, Asked(a.node, a.t_ms, a.topic, a.correlation,
                      next(iter(replies.get(a.node, ())), None), a.method, a.task_id,
                      a.context_id, a, bearer=a.bearer))
        for a in h.of(A2mAttempt)]
    out += _asked_off_the_wire(h, own)
    return [a for _seq, a in sorted(out, key=lambda x: x[0])]


def _asked_off_the_wire(h: History, skip: set[str]) -> list[tuple[int, Asked]]:
    """The requests the taps saw leave each requester but those of `skip`, by seq."""
    out: list[tuple[int, Asked]] = []
    # the tap reads a PUBLISH after the proxy's faults acted on it
    stripped = _tampering(h, "correlation_data", "strip")
    altered = _tampering(h, "correlation_data", "alter")
    # a request a responder took in and sent on as it came (a card owner handing its task
    # over) is not one it asked
    took = {(t.node, t.response_topic, t.correlation) for t in h.memo(intake)}
    for w in h.of(Wire):
        if w.node in skip or w.direction != "out" or w.packet != "PUBLISH" \
                or not (w.topic or "").startswith(REQUEST_PREFIX):
            continue
        p = _props(w)
        corr = _text(p.get("correlationData"))
        if (w.node, _text(p.get("responseTopic")), corr) in took:
            continue
        windows = stripped[w.node] if corr is None else \
            altered[w.node] if corr.endswith(TAMPERED) else []
        tampered = any(a <= w.t_ms <= b for a, b in windows)
        if tampered and corr is not None:
            corr = corr.removesuffix(TAMPERED)
        bearer = _user(w, "a2a-authorization")
        out.append((w.seq, Asked(w.node, w.t_ms, w.topic or "", corr,
                                 _text(p.get("responseTopic")), w.rpc_method, w.task_id,
                                 w.conversation_id, w, tampered,
                                 bearer is not None and bearer.startswith("Bearer "))))
    return out


def heard(h: History) -> list[Heard]:
    """Every reply a requester received, in history order."""
    own = h.memo(_askers)
    # (its own record keeps no error code: -1, an error it may not retry on)
    out: list[tuple[int, Heard]] = [
        (r.seq, Heard(r.node, r.t_ms, r.topic, r.correlation,
                      -1 if r.reply is ReplyKind.ERROR else None, r.state, r,
                      r.responder_agent_id))
        for r in h.of(A2mReplyTaken) if r.reason is None]
    out += _heard_off_the_wire(h, own)
    return [x for _seq, x in sorted(out, key=lambda x: x[0])]


def _heard_off_the_wire(h: History, skip: set[str]) -> list[tuple[int, Heard]]:
    """The replies the taps saw reach each requester but those of `skip`, by seq."""
    out: list[tuple[int, Heard]] = []
    subscribed: dict[tuple[str, str], float] = h.memo(_subscribed_at)
    for w in h.of(Wire):
        topic = w.topic or ""
        if w.node in skip or w.direction != "in" or w.packet != "PUBLISH" \
                or not topic.startswith("$a2a/v1/reply/") or (w.node, topic) not in subscribed:
            continue
        out.append((w.seq, Heard(w.node, w.t_ms, topic, _text(_props(w).get("correlationData")),
                                 w.rpc_error, w.task_state, w,
                                 _user(w, "a2a-responder-agent-id"))))
    return out


def _subscribed_at(h: History) -> dict[tuple[str, str], float]:
    """(tapped node, filter) -> when its first SUBSCRIBE naming that filter left it."""
    out: dict[tuple[str, str], float] = {}
    for w in h.of(Wire):
        if w.packet == "SUBSCRIBE" and w.direction == "out":
            for f in w.filters or ():
                out.setdefault((w.node, f), w.t_ms)
    return out


def _reply_topics(h: History) -> dict[str, list[str]]:
    """Each requester's reply topics: what it subscribed before asking (A2M-SESS-2)."""
    out: dict[str, list[str]] = defaultdict(list)
    for r in h.of(ExecutorsRegistered):
        if not r.agents:
            out[r.node] += [f for f in r.subscribed if f not in out[r.node]]
    return out


def _agent_of(h: History) -> dict[str, str]:
    """Each responder node -> its agent id (what it registered)."""
    return {r.node: r.agents[0] for r in h.of(ExecutorsRegistered) if r.agents}


def _recorders(h: History) -> set[str]:
    """The responders that record what they take in and send (the bench's reference)."""
    return {e.node for e in h.of(A2mRequestTaken)} | {e.node for e in h.of(A2mReplied)}


def _props(w: Wire) -> dict[str, object]:
    return dict(w.properties) if isinstance(w.properties, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def intake(h: History) -> list[Took]:
    """Every request a responder took in, in history order."""
    own = h.memo(_recorders)
    out: list[tuple[int, Took]] = [
        (t.seq, Took(t.node, t.t_ms, t.topic, t.correlation, t.response_topic, t.task_id,
                     t.intake in (Intake.REFUSED, Intake.DROPPED), t, t.context_id, t.method))
        for t in h.of(A2mRequestTaken)]
    for w in h.of(Wire):
        if w.node in own or w.direction != "in" or w.packet != "PUBLISH" \
                or not (w.topic or "").startswith(REQUEST_PREFIX):
            continue
        p = _props(w)
        out.append((w.seq, Took(w.node, w.t_ms, w.topic or "", _text(p.get("correlationData")),
                                _text(p.get("responseTopic")), w.task_id, None, w,
                                w.conversation_id, w.rpc_method)))
    return [t for _seq, t in sorted(out, key=lambda x: x[0])]


def answers(h: History) -> list[Answer]:
    """Every reply and stream item a responder published, in history order."""
    own = h.memo(_recorders)
    out: list[tuple[int, Answer]] = [
        (r.seq, Answer(r.node, r.t_ms, r.topic, r.correlation, r.reply.value,
                       r.reply is ReplyKind.ERROR
                       or (r.reply is not ReplyKind.ARTIFACT and r.state in FINAL_STATES)
                       or (r.reply is ReplyKind.RESULT and r.state is None), r.task_id, r,
                       r.state, r.context_id))
        for r in h.of(A2mReplied)]
    for w in h.of(Wire):
        topic = w.topic or ""
        if w.node in own or w.direction != "out" or w.packet != "PUBLISH" \
                or topic.startswith((REQUEST_PREFIX, DISCOVERY_PREFIX)):
            continue
        error = w.rpc_error is not None
        out.append((w.seq, Answer(w.node, w.t_ms, topic, _text(_props(w).get("correlationData")),
                                  "ERROR" if error else "REPLY",
                                  error or w.task_state in FINAL_STATES, w.task_id, w,
                                  w.task_state, w.conversation_id)))
    return [a for _seq, a in sorted(out, key=lambda x: x[0])]


def _answers_by_path(h: History) -> dict[tuple[str | None, str], list[Answer]]:
    """Every answer a responder published, by the reply path it went to."""
    out: dict[tuple[str | None, str], list[Answer]] = defaultdict(list)
    for a in h.memo(answers):
        if a.correlation is not None:
            out[(a.topic, a.correlation)].append(a)
    return out


def _tokens_required(h: History) -> bool:
    """Whether the run's responders required bearer tokens (run_started.bearerTokens)."""
    started = h.of(RunStarted)
    return bool(started and started[0].bearer_tokens)


#: property_tampering's mark on altered Correlation Data ("|tampered" appended, as
#: docs/faults.md documents the fault), as the history writes it: hex. Written out here, not
#: imported: a judge shares no code with what it judges.
TAMPERED = b"|tampered".hex()


#: How long before a tampering fault started a publish it acted on may have been recorded:
#: journaled as it is handed to the client, it reaches the node's link a little later
#: (a commit, a slow link, the client's queue while it reconnects).
TAMPER_LEAD_MS = 2_000.0


def _tampering(h: History, prop: str, action: str,
               key: Callable[[str], bool] = lambda _key: True
               ) -> dict[str, list[tuple[float, float]]]:
    """Node -> when a property_tampering fault on `prop` with `action` (a User Property:
    one whose `key` passes) acted on its publishes (journaled start to heal: a publish it
    tampered with left meanwhile, or was recorded up to TAMPER_LEAD_MS before the start and
    was still on its way)."""
    healed = {e.fault_index: e.t_ms for e in h.of(FaultHealed)}
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for f in h.of(FaultStart):
        params = f.params if isinstance(f.params, dict) else {}
        if f.fault == "property_tampering" and params.get("property") == prop \
                and params.get("action") == action and key(str(params.get("key"))):
            out[str(params.get("node"))].append((f.t_ms - TAMPER_LEAD_MS,
                                                 healed.get(f.fault_index, h.end_ms)))
    return out


#: What a responder answers each request the malformed_request fault sends (attack_sent.how),
#: as the profile and JSON-RPC 2.0 prescribe: the error codes it may answer with; () where
#: there is no reply path (A2M-RSP-2: dropped); ANSWERED for the one valid request (binary
#: Correlation Data), which gets a reply that is no error. Written out here, from the spec.
#: Where the spec names no code — Responder Behavior 4's "invalid protocol input" for a bad
#: Task.id, a context User Property that differs from the payload's (A2M-CTX-4: binding
#: metadata) — invalid params and the binding's transport_protocol_error both answer it.
ANSWERED = 0


#: Valid requests carrying metadata the profile says changes nothing, each answered as any
#: request is: an a2a- User Property it does not define is ignored (A2M-PROP-2), an
#: a2a-artifact-mode nobody supports leaves the reply in JSON (A2M-BIN-1)
IGNORED_ANSWER: dict[str, tuple[int, ...]] = {"prop:a2a-unknown:present": (ANSWERED,)}


ARTIFACT_MODE_ANSWER: dict[str, tuple[int, ...]] = {
    "prop:a2a-artifact-mode:unknown": (ANSWERED,)}


#: A request whose bearer token a responder that requires tokens must refuse (A2M-RSP-7): the
#: spec names no code (A2A v1.0 has none for a failed authentication; "follow the core
#: A2A/JSON-RPC definitions"), so any JSON-RPC error answers it — never a result.
ANY_ERROR = 1


#: The requests whose Task.id a valid request ran: the fault's opening (context_switch), or
#: the request itself (binary_correlation) — that one execution is not a malformed one's
OPENED = frozenset({"context_switch", "binary_correlation", *IGNORED_ANSWER,
                    *ARTIFACT_MODE_ANSWER})


#: How long a responder has to answer a malformed request before it counts as unanswered
MALFORMED_WITHIN_MS = 5_000.0


def _hostile(h: History, c: Collector, table: Callable[[str], tuple[int, ...] | None],
             what: str) -> None:
    """The malformed_request fault's requests of the cases `table` knows, each answered as
    it says, run nowhere, and the responder alive after them."""
    out: dict[tuple[str, str], list[Answer]] = defaultdict(list)
    for a in h.memo(answers):
        out[(a.node, a.topic.rsplit("/", 1)[-1])].append(a)
    # a request the target handed over is answered by the agent it handed it to
    node_of = {agent: node for node, agent in h.memo(_agent_of).items()}
    handed: dict[tuple[str, str], set[str]] = defaultdict(set)
    for t in h.of(A2mRequestTaken):
        if t.intake is Intake.HANDED_OVER and t.handed_to and t.response_topic:
            handed[(t.node, t.response_topic.rsplit("/", 1)[-1])].add(
                node_of.get(t.handed_to, t.handed_to))
    ran: dict[str, str] = {e.task_id: e.node for e in h.of(TaskExecuted)}
    crashes = h.memo(Transit).crashes
    windows = h.memo(fault_windows)     # a fault on its node or the broker may lose it
    died = [x for x in h.of(NodeCrashed) if x.fault_index is None]
    lives = sorted([(x.seq, x.node, False) for x in h.of(NodeCrashed)]
                   + [(x.seq, x.node, True) for x in h.of(NodeStarted)])

    def down_at(node: str, seq: int) -> bool:
        """Whether `node` had crashed, and not started again, by history position `seq`."""
        up = True
        for at, who, started in lives:
            if at > seq:
                break
            if who == node:
                up = started
        return not up
    sent = [a for a in h.of(AttackSent) if a.attack == "malformed_request"]
    last_before = {d.seq: max((a for a in sent if a.target_node_id == d.node
                               and a.seq < d.seq), key=lambda a: a.seq, default=None)
                   for d in died}
    for attack in h.of(AttackSent):
        want = table(attack.how) if attack.attack == "malformed_request" else None
        if want is None:
            continue
        node, token = attack.target_node_id or "", attack.message_id
        c.count("malformed_wrong_type" if attack.how.startswith("type:")
                else "malformed_wrong_value" if attack.how.startswith("value:")
                else f"malformed_{attack.how}")
        got = out[(node, token)] + [a for d in sorted(handed[(node, token)])
                                    for a in out[(d, token)]]
        if attack.request_id in ran and attack.how not in OPENED:
            c.violation(f"{ran[attack.request_id]} executed the task of {what} sent to "
                        f"{node} ({attack.how})", attack)
        # a death is put down to the last request the fault sent the node before it
        killed = [d for d in died if d.node == node and last_before.get(d.seq) is attack
                  and d.t_ms <= attack.t_ms + MALFORMED_WITHIN_MS]
        if killed and not got:
            c.violation(f"{node} died after {what} ({attack.how}): {killed[0].how}",
                        attack, killed[0])
            continue
        if not want:
            if got:
                c.violation(f"{node} answered a request with no Response Topic it could "
                            f"publish to ({attack.how})", attack, got[0].event)
            continue
        says = " or ".join("a reply that is no error" if w == ANSWERED else
                           "some JSON-RPC error" if w == ANY_ERROR else f"error {w}"
                           for w in want)
        if not got:
            until = attack.t_ms + MALFORMED_WITHIN_MS
            busy = down_at(node, attack.seq) or any(
                attack.t_ms <= t <= until for t in crashes[node]) or any(
                w.fault != "malformed_request" and (not w.nodes or node in w.nodes)
                and w.start_ms <= until and held_until(h, w, node) >= attack.t_ms
                for w in windows)   # (a lossy link until it caught up: explore, seed 38)
            if busy or until > h.end_ms:
                c.unknown("malformed_unanswered_while_down_or_at_the_end")
            else:
                c.violation(f"{node} never answered {what} ({attack.how}); "
                            f"the profile says {says}", attack)
            continue
        codes = [_code(a) or ANSWERED for a in got]
        if not any(code in want or (ANY_ERROR in want and code != ANSWERED) for code in codes):
            c.violation(f"{node} answered {what} ({attack.how}) with "
                        f"{'error ' + str(codes[0]) if codes[0] else 'no error'}; the "
                        f"profile says {says}", attack, got[0].event)


def _code(a: Answer) -> int | None:
    """An answer's JSON-RPC error code (None: not an error)."""
    if isinstance(a.event, A2mReplied):
        return a.event.code
    if isinstance(a.event, Wire):
        return a.event.rpc_error
    return None


def _pool_of(topic: str) -> str | None:
    """The pool a request topic names: `$a2a/v1/request/{org}/{unit}/pool/{pool}` (the
    profile's canonical pool topic, read here on its own, not with the agents' code)."""
    parts = topic.split("/")
    if len(parts) == 7 and parts[:3] == ["$a2a", "v1", "request"] and parts[5] == "pool":
        return topic
    return None


def _user_pairs(w: Wire) -> list[tuple[object, object]]:
    """A tapped PUBLISH's User Properties, (name, value) in order, the well-formed ones."""
    pairs = _props(w).get("userProperties")
    return [(p[0], p[1]) for p in (pairs if isinstance(pairs, list) else [])
            if isinstance(p, list) and len(p) == 2]


def _user(w: Wire, key: str) -> str | None:
    """The last value of User Property `key` on a tapped PUBLISH."""
    found = None
    for name, value in _user_pairs(w):
        if name == key:
            found = value
    return found if isinstance(found, str) else None


#: The User Properties the binding defines (its specification at e533bd7), each `a2a-...`
BINDING_PROPERTIES = frozenset({
    "a2a-artifact-id", "a2a-artifact-mode", "a2a-authorization", "a2a-chunk-seqno",
    "a2a-context-id", "a2a-event-type", "a2a-last-chunk", "a2a-protocol",
    "a2a-recipient-agent-id", "a2a-recipient-kid", "a2a-requester-agent-id",
    "a2a-responder-agent-id", "a2a-security-profile", "a2a-status", "a2a-status-source",
    "a2a-task-id"})
