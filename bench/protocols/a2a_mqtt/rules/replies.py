"""A2A over MQTT, the responder's side (`a2a_replies`): every reply answers a request that was sent, refused input runs nothing, a task keeps its context and stays ended."""

from __future__ import annotations

from collections import defaultdict

from bench.checks import Checker, Collector, rule
from bench.checks.network import Transit, fault_windows
from bench.checks.terms import IN_FLIGHT_AT_END_MS, records_late_ms
from bench.core.events import (
    A2mAttempt,
    A2mReplyTaken,
    A2mRequestTaken,
    A2mTaskState,
    AgentAnswered,
    AgentCalled,
    AttackSent,
    Event,
    FaultFired,
    FaultHealed,
    FaultStart,
    Intake,
    NodeCrashed,
    NodeStarted,
    RunStarted,
    TaskExecuted,
    Wire,
)
from bench.history import History
from bench.protocols.a2a_mqtt import SPEC
from bench.protocols.a2a_mqtt.rules.common import (
    ANSWERED,
    ARTIFACT_MODE_ANSWER,
    EARLY_MS,
    FINAL_STATES,
    IGNORED_ANSWER,
    REPLY_FIRST_MS,
    TAMPERED,
    TERMINAL_STATES,
    Answer,
    Asked,
    Took,
    _answers_by_path,
    _code,
    _hostile,
    _reply_topics,
    _tampering,
    answers,
    asked,
    intake,
)

COMPLETED, FAILED, CANCELED, INPUT_REQUIRED = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
                                              "TASK_STATE_CANCELED",
                                              "TASK_STATE_INPUT_REQUIRED")


#: JSON-RPC 2.0: invalid params (A2M-CTX-3's answer to a context that is not the task's)
INVALID_PARAMS = -32602


def _sent(h: History) -> set[tuple[str | None, str]]:
    """The reply paths (Response Topic, Correlation Data) of every request a requester sent:
    what tells its requests from an attacker's injections."""
    return {(a.response_topic, a.correlation) for a in h.memo(asked) if a.correlation}


@rule("A2M-RR-3, A2M-STREAM-1, A2M-ERR-1: a reply goes to its request's Response Topic with "
      "its Correlation Data")
def replies_answer_a_request(h: History, c: Collector) -> None:
    """Every reply, stream item and error a responder published carries the Correlation
    Data of a request it took in, and goes to that request's Response Topic; and every
    request it took in was one a requester sent (or an injection a fault journaled).
    A responder that answers on a fixed topic, or drops or rewrites the Correlation Data,
    answers nobody. A requester's reply without Correlation Data is accounted for by a
    responder's refusal without any sent before it, a stripping fault, or a copy of one
    such — MQTT's own re-delivery (DUP, the same packet id) or the redelivery fault's."""
    taken: dict[str, set[tuple[str | None, str | None]]] = defaultdict(set)
    took = h.memo(intake)
    for t in took:
        taken[t.node].add((t.correlation, t.response_topic))
    sent_out = h.memo(answers)
    stripped = _tampering(h, "correlation_data", "strip")
    altered = _tampering(h, "correlation_data", "alter")
    for r in sent_out:
        c.count("replies")
        # the tap reads what crossed, after the proxy's faults acted: a reply it saw without
        # Correlation Data, or with it altered, while a fault did that to its node's
        # publishes, left the node with it
        if isinstance(r.event, Wire) and any(a <= r.t_ms <= b for a, b in (
                stripped[r.node] if r.correlation is None
                else altered[r.node] if r.correlation.endswith(TAMPERED) else ())):
            c.count("tampered_on_the_tap")
            continue
        if (r.correlation, r.topic) not in taken[r.node]:
            c.violation(f"{r.node} published a {r.kind} to {r.topic!r} with Correlation "
                        f"Data {r.correlation!r}: no request it took in had that reply path",
                        r.event)
    injected = bool(h.of(AttackSent))
    # a responder that took a request without Correlation Data may refuse it on its Response
    # Topic with none (A2M-RSP-2): the requester gets a reply it ignores (A2M-REQ-2)
    echoed_none: dict[str, list[int]] = defaultdict(list)     # topic -> those refusals' seqs
    for r in sent_out:
        if r.correlation is None and (None, r.topic) in taken[r.node]:
            echoed_none[r.topic].append(r.event.seq)
    # replies with Correlation Data a responder published while a fault stripped it from its
    # publishes: each may reach its requester without any
    # (one handed to its client before the fault healed; it may cross the link while the
    # fault acts — later than it was recorded, if the link held it or a reconnect resent it)
    strippable: dict[str, list[float]] = defaultdict(list)     # topic -> faults' starts
    for r in sent_out:
        starts = [a for a, b in stripped[r.node] if r.t_ms <= b]
        # (off the tap, one already seen stripped)
        if starts and (r.correlation is not None or isinstance(r.event, Wire)):
            strippable[r.topic].append(min(starts))
    # the qos1_redelivery fault delivers a PUBLISH to its node again (the broker resends it,
    # or the link duplicates it): while it acts on a requester (and as long after as a copy
    # may still come), a reply without Correlation Data once more is a copy of one that came
    # before it, one copy each (explore, seed 7 run 1193 and seed 8 run 1558)
    copying = h.memo(_copying)
    copyable: dict[str, int] = defaultdict(int)      # topic -> replies not yet copied

    def copied(got: A2mReplyTaken) -> bool:
        return any((not nodes or got.node in nodes) and start <= got.t_ms <= end
                   for nodes, start, end in copying)
    # what requesters got: a reply without Correlation Data was sent by somebody breaking
    # A2M-RR-3, whatever the responders recorded of themselves
    seen_packets: set[tuple[str, str, int | None]] = set()
    for got in h.of(A2mReplyTaken):
        if got.correlation is not None or injected:
            continue
        refusals = echoed_none[got.topic]
        packet = (got.node, got.topic, got.packet_id)
        if got.dup and packet in seen_packets:
            # MQTT's own re-delivery of a PUBLISH it already handed over (DUP, the same packet
            # id: the PUBACK lost, the session resumed): the same reply (explore, seed 26 run
            # 1207)
            c.count("redelivered_copy_of_a_reply_without_correlation")
            continue
        seen_packets.add(packet)
        if refusals and min(refusals) < got.seq:     # one of the refusals sent before it
            refusals.remove(min(refusals))
            copyable[got.topic] += 1
            c.count("refusals_of_requests_without_correlation")
        elif (i := next((k for k, start in enumerate(strippable[got.topic])
                         if start <= got.t_ms), None)) is not None:
            strippable[got.topic].pop(i)
            copyable[got.topic] += 1
            c.count("correlation_stripped_in_flight")
        elif copyable[got.topic] > 0 and copied(got):
            copyable[got.topic] -= 1
            c.count("copy_the_redelivery_fault_made")
        elif refusals:   # live, two processes' records may reach the history out of order
            refusals.remove(min(refusals))
            c.count("refusals_of_requests_without_correlation")
        else:
            c.violation(f"{got.node} got a reply on {got.topic!r} without Correlation Data", got)
    # Correlation Data is unique on one reply topic only (A2M-REQ-1): by both
    reply_topics = h.memo(_reply_topics)
    published: list[Asked] = h.memo(asked)
    sent: dict[tuple[str, str], Asked] = {
        (topic, a.correlation): a for a in published if a.correlation is not None
        for topic in (reply_topics[a.node] if isinstance(a.event, A2mAttempt)
                      else [a.response_topic or ""])}
    sent_any = {a.correlation for a in published}
    forwarders = sorted({t.node for t in h.of(A2mRequestTaken)
                         if t.intake is Intake.HANDED_OVER})
    for t in took:
        if t.correlation is None or t.correlation in sent_any or injected:
            continue
        # sent with the Correlation Data it had before a fault on its sender's link altered it
        a = sent.get((t.response_topic or "", t.correlation.removesuffix(TAMPERED))) \
            if t.correlation.endswith(TAMPERED) else None
        # handed to its client before the fault healed, taken in after it started — on
        # its requester's link, or on the link of a card owner that sent it on
        if a is not None and any(a.t_ms <= y and t.t_ms >= x for node in (a.node, *forwarders)
                                 for x, y in altered[node]):
            c.count("correlation_altered_in_flight")
            continue
        c.violation(f"{t.node} took in a request with Correlation Data {t.correlation!r} "
                    "that no requester sent", t.event)


def _copying(h: History) -> list[tuple[tuple[str, ...], float, float]]:
    """When each qos1_redelivery fault may have handed a node a copy of a delivery: from its
    start until its heal, or until the last copy it scheduled was due (a simulated broker
    journals each with its delay, up to seconds past the heal: explore, seed 13 run 1782),
    and a copy's flight after that. (nodes it acts on — none: every node —, from, until)"""
    healed = {e.fault_index: e.t_ms for e in h.of(FaultHealed)}
    due: dict[int, float] = defaultdict(float)
    for x in h.of(FaultFired):
        delay = x.details.get("delayMs") if isinstance(x.details, dict) else None
        if x.fault == "qos1_redelivery" and x.fault_index is not None \
                and isinstance(delay, int | float):
            due[x.fault_index] = max(due[x.fault_index], x.t_ms + delay)
    out: list[tuple[tuple[str, ...], float, float]] = []
    for f in h.of(FaultStart):
        if f.fault == "qos1_redelivery":
            params = f.params if isinstance(f.params, dict) else {}
            node = params.get("node")
            end = max(healed.get(f.fault_index, h.end_ms), due[f.fault_index])
            out.append(((str(node),) if node else (), f.t_ms, end + IN_FLIGHT_AT_END_MS))
    return out


@rule("A2M-RR-6, A2M-RR-4: every reply and stream item of a task echoes the requester's "
      "Task.id (never one of its own, nor the Correlation Data taken for one)")
def replies_echo_the_task_id(h: History, c: Collector) -> None:
    """A result, status or artifact a responder sent for a request that named a Task.id
    carries that Task.id, not one of its own making: the requester tracks the task by it
    (and retries under it). An error may name none."""
    # Correlation Data is unique on one reply topic only (A2M-REQ-1): keyed by both
    asked: dict[tuple[str, str | None, str | None], str] = {}
    for t in h.memo(intake):
        if t.task_id is not None and t.correlation is not None:
            asked.setdefault((t.node, t.response_topic, t.correlation), t.task_id)
    for a in h.memo(answers):
        want = asked.get((a.node, a.topic, a.correlation))
        if want is None or a.kind == "ERROR":
            continue
        c.count("answers_of_a_task")
        if a.task_id != want:
            c.violation(f"{a.node} answered a request for task {want} with Task.id "
                        f"{a.task_id!r}", a.event)


@rule("A2M-STREAM-2, A2M-STREAM-3: nothing follows a correlation's final answer")
def nothing_after_the_final_answer(h: History, c: Collector) -> None:
    """Once a responder sent a correlation its final answer (a terminal state, an
    input-required, an error), it sends that correlation nothing more — unless the request
    came to it again (a QoS1 redelivery of the same PUBLISH): then it may answer again."""
    events: list[tuple[int, str, Took | Answer]] = []
    for t in h.memo(intake):
        events.append((t.event.seq, "took", t))
    for a in h.memo(answers):
        events.append((a.event.seq, "answer", a))
    closed: dict[tuple[str, str | None, str | None], Answer] = {}
    for _seq, what, x in sorted(events, key=lambda e: e[0]):
        if x.correlation is None:
            continue      # no correlation to end (replies_answer_a_request judges those)
        # Correlation Data is unique on one reply topic only (A2M-REQ-1)
        key = (x.node, x.response_topic if isinstance(x, Took) else x.topic, x.correlation)
        if what == "took":
            closed.pop(key, None)
            continue
        assert isinstance(x, Answer)
        final = closed.get(key)
        if final is not None:
            c.violation(f"{x.node} sent correlation {x.correlation} a {x.kind} after its "
                        f"final {final.kind}", final.event, x.event)
        elif x.final:
            c.count("correlations_ended")
            closed[key] = x


#: A request a responder took in has, within the requester's first-reply wait (A2M-RETRY-1),
#: its final answer or its task's work begun: one that did neither has left its requester
#: retrying into nothing.
WORK_BEGINS_WITHIN_MS = REPLY_FIRST_MS


#: How soon after its agent answered a responder must have published the task's final
#: answer: nothing stands between the two but the responder itself (a loaded machine's
#: scheduling included).
ANSWER_AFTER_ITS_AGENT_MS = 3_000.0


#: Faults that stop a node: a request it took in before is lost with the process (its
#: retry, taken in after the restart, is owed an answer of its own).
NODE_FAULTS = frozenset({"restart", "crash"})


@rule("A2M-RR-3, A2M-RETRY-3: every request a responder took in ends in a final answer on "
      "its reply path, or in a loss the run explains")
def every_request_answered(h: History, c: Collector) -> None:
    """Liveness, from what the responder took in (its wire, or its records) and what it
    published: every request a requester sent that reached a responder is answered — a
    SendMessage by a final answer of its task (a terminal state, input-required, an error)
    published after it came under its own Correlation Data — a retry that joined a task
    still running is owed the task's end too, not only its state at once (a final answer
    to an earlier attempt does not answer it); a GetTask or CancelTask by any answer under
    its Correlation Data.
    It is owed `ANSWER_AFTER_ITS_AGENT_MS` after the task's work ended (the bench's agent
    answered it, or, of the reference, the task's state ended), or the first-reply wait
    after it came when no work on the task began (the agent called) and none had ended.
    Explained, not owed: the responder stopped (crashed, restarted) before it was due, or
    a fault on its link or the broker's acted meanwhile; it passed the request on to a
    delegate (whose answer it is then); its agent never answered; the run ended first
    (undecided). A responder that takes requests in and lets them lie is FALSE here, with
    no fault in sight."""
    sent, by_corr = h.memo(_sent), h.memo(_answers_by_path)
    crashes = h.memo(Transit).crashes
    windows = [w for w in h.memo(fault_windows) if w.fault not in NODE_FAULTS]
    ended: dict[tuple[str, str], list[float]] = defaultdict(list)   # (node, task) -> when
    for e in h.of(AgentAnswered):
        ended[(e.node, e.task_id)].append(e.t_ms)
    for st in h.of(A2mTaskState):
        if st.state in FINAL_STATES:
            ended[(st.node, st.task_id)].append(st.t_ms)
    began: set[tuple[str, str]] = {(e.node, e.task_id) for e in h.of(AgentCalled)}
    began |= {(e.node, e.task_id) for e in h.of(TaskExecuted)}
    grace = ANSWER_AFTER_ITS_AGENT_MS + records_late_ms(h)
    took = h.memo(intake)
    # a request a card owner sent on to its delegate is the delegate's to answer from there
    passed_on = {id(t) for t in took if isinstance(t.event, A2mRequestTaken)
                 and t.event.intake is Intake.HANDED_OVER}
    last_taker: dict[tuple[str | None, str | None], str] = {}
    for t in took:
        last_taker[(t.response_topic, t.correlation)] = t.node
    for t in took:
        if t.refused or t.task_id is None or t.correlation is None \
                or (t.response_topic, t.correlation) not in sent:
            continue
        if id(t) in passed_on or last_taker[(t.response_topic, t.correlation)] != t.node:
            c.count("passed_on_to_another_agent")
            continue
        c.count("requests_taken")
        mine = by_corr.get((t.response_topic, t.correlation), [])
        if t.method in ("GetTask", "CancelTask"):
            if any(a.t_ms >= t.t_ms - EARLY_MS for a in mine):
                continue
        elif any(a.final and a.t_ms >= t.t_ms - EARLY_MS for a in mine):
            continue
        work = sorted(ended.get((t.node, t.task_id), ()))
        later = [x for x in work if x >= t.t_ms]
        if later or work:
            due = (later[0] if later else t.t_ms) + grace
        elif (t.node, t.task_id) in began:
            c.count("its_agent_never_answered")
            continue
        else:
            due = t.t_ms + WORK_BEGINS_WITHIN_MS
        if any(t.t_ms <= x <= due for x in crashes.get(t.node, ())):
            c.count("lost_with_its_process")
        elif any(w.acts_on(t.t_ms, due, t.node) for w in windows):
            c.count("while_a_fault_acted")
        elif due > h.end_ms:
            c.unknown("still_owed_when_the_run_ended")
        else:
            what = "answer" if t.method in ("GetTask", "CancelTask") else "final answer"
            why = "its agent answered" if work else "no work began"
            c.violation(f"{t.node} took {t.method or 'a request'} for task {t.task_id} at "
                        f"{t.t_ms:.0f} ms and published no {what} for it by {due:.0f} ms "
                        f"({why}; the run went on to {h.end_ms:.0f} ms with no fault on its "
                        "way)", t.event)


#: JSON-RPC (A2A): the error a CancelTask of a task that already ended may get
TASK_NOT_CANCELABLE = -32002


#: Errors that refuse the request itself, not the task it names: invalid request (a token
#: refused, A2M-RSP-7), expired (-32003), responder unavailable (-32004)
REFUSES_THE_REQUEST = frozenset({-32600, -32003, -32004})


@rule("A2M-BASE-2: a task a responder said it has stays known to it: a GetTask or "
      "CancelTask for it is answered with the task, not an error that denies it")
def known_tasks_stay_known(h: History, c: Collector) -> None:
    """Once a responder published a state of a task (it has the task), a GetTask for it, or
    a CancelTask (but for 'not cancelable' once the task ended), that reaches it later is
    answered with the task, or refused for what is wrong with the request itself (its
    token, its expiry: `REFUSES_THE_REQUEST`) — across its restarts too: a responder that
    forgets its tasks (a table in memory) or does not implement GetTask and CancelTask
    answers the requester that follows a task up with an error about a task it said it
    had."""
    has: dict[tuple[str, str], Answer] = {}       # (node, Task.id) -> its first state
    for a in h.memo(answers):
        if a.task_id is not None and a.state is not None:
            has.setdefault((a.node, a.task_id), a)
    sent, by_corr = h.memo(_sent), h.memo(_answers_by_path)
    for t in h.memo(intake):
        if t.method not in ("GetTask", "CancelTask") or t.task_id is None \
                or t.correlation is None or (t.response_topic, t.correlation) not in sent:
            continue
        said = has.get((t.node, t.task_id))
        if said is None or said.t_ms > t.t_ms:
            continue
        c.count("follow_ups_of_a_task_it_had")
        for a in by_corr.get((t.response_topic, t.correlation), ()):
            code = _code(a)
            if a.t_ms < t.t_ms - EARLY_MS or a.kind != "ERROR" or code in REFUSES_THE_REQUEST \
                    or (t.method == "CancelTask" and code == TASK_NOT_CANCELABLE):
                continue
            c.violation(f"{t.node} answered {t.method} for task {t.task_id} with error {code} "
                        f"at {a.t_ms:.0f} ms, after it said the task was "
                        f"{said.state} at {said.t_ms:.0f} ms", said.event, t.event, a.event)
            break


@rule("A2M-CTX-1, A2M-CTX-3: a task keeps the context it was created in: every answer echoes "
      "it; a request naming another is refused (-32602)")
def contexts_are_kept(h: History, c: Collector) -> None:
    """A task's context is the contextId of the request that created it (its first request
    a responder took in and did not refuse), or, if that named none, the first its
    responder answered with. Every later result, status or artifact of the task carries
    that context; a request for the task that names another context is answered with
    JSON-RPC -32602 and changes nothing (the task's answers keep the first context). A
    responder that echoes the latest request's context, or drops it from stream items,
    fails this."""
    took: list[Took] = h.memo(intake)
    sent: list[Answer] = h.memo(answers)
    # Correlation Data is unique on one reply topic only (A2M-REQ-1): keyed by both
    answer_to: dict[tuple[str, str | None, str | None], list[Answer]] = defaultdict(list)
    for a in sent:
        answer_to[(a.node, a.topic, a.correlation)].append(a)
    context: dict[tuple[str, str], str | None] = {}
    events: list[tuple[int, Took | Answer]] = [(t.event.seq, t) for t in took]
    events += [(a.event.seq, a) for a in sent]
    for _seq, x in sorted(events, key=lambda e: e[0]):
        if x.task_id is None:
            continue
        task = (x.node, x.task_id)
        if isinstance(x, Took):
            if x.method in ("GetTask", "CancelTask"):
                continue
            if task not in context:
                if not x.refused:
                    context[task] = x.context_id
                continue
            was = context[task]
            if x.context_id is None or was is None or x.context_id == was:
                continue
            c.count("requests_naming_another_context")
            got = answer_to[(x.node, x.response_topic, x.correlation)]
            codes = [_code(a) for a in got if a.t_ms >= x.t_ms]
            if codes and INVALID_PARAMS not in codes:
                c.violation(f"{x.node} took a request for task {x.task_id} in context "
                            f"{x.context_id!r}, created in {was!r}, and answered "
                            f"{codes[0] if codes[0] is not None else 'it'} (the profile "
                            f"says error {INVALID_PARAMS})", x.event, got[0].event)
            continue
        if x.kind == "ERROR":
            continue
        c.count("answers_of_a_task")
        want = context.get(task)
        if want is None:
            context[task] = x.context_id
        elif x.context_id != want:
            c.violation(f"{x.node} answered for task {x.task_id} with context "
                        f"{x.context_id!r}; the task was created in {want!r}", x.event)


@rule("A2M-RETRY-3: a task that ended stays ended: no later answer of it says another state")
def ended_tasks_stay_ended(h: History, c: Collector) -> None:
    """Once a responder answered a task with a terminal state (completed, failed,
    canceled, rejected), every later answer it gives about that task — to a retry, a
    GetTask, a CancelTask, a redelivery — says that same state: a task is never
    completed after it was canceled, nor run again after it failed. A responder whose
    CancelTask answers 'canceled' but lets the work finish, or that forgets a finished
    task on a restart, fails this."""
    ended: dict[tuple[str, str], Answer] = {}
    for a in h.memo(answers):
        if a.task_id is None or a.state is None or a.kind == "ERROR":
            continue
        task = (a.node, a.task_id)
        first = ended.get(task)
        if first is None:
            if a.state in TERMINAL_STATES:
                ended[task] = a
                c.count("tasks_ended")
            continue
        c.count("answers_after_the_end")
        if a.state != first.state:
            c.violation(f"{a.node} said task {a.task_id} was {a.state} after it had said "
                        f"{first.state}", first.event, a.event)


@rule("A2M-BASE-1: a task ends as its agent did: COMPLETED when the agent succeeded, FAILED "
      "when it failed, INPUT_REQUIRED when it asked for input")
def tasks_end_as_their_agent_did(h: History, c: Collector) -> None:
    """The bench plays every responder's agent and journals each answer it gives
    (`AgentAnswered`: ok or failed, and whether it asked for input) — its own observation,
    never the responder's word. The first stream-final answer the responder publishes about
    that task afterwards (off its wire, or from its records) says what the agent did:
    `TASK_STATE_COMPLETED` for a success, `TASK_STATE_FAILED` for a failure,
    `TASK_STATE_INPUT_REQUIRED` for a question. Explained, not judged: the task had ended
    before the agent answered (cancelled, failed by its watchdog: the answer comes too
    late to count), the responder crashed in between, or a CancelTask for the task came
    first (`TASK_STATE_CANCELED`). A responder that reports a failed task COMPLETED (or a
    successful one FAILED, or a finished one still waiting for input) fails this; the
    liveness of the answer is `every_request_answered`'s."""
    crashes = h.memo(Transit).crashes
    finals: dict[tuple[str, str], list[Answer]] = defaultdict(list)
    for a in h.memo(answers):
        if a.task_id is not None and a.kind != "ERROR" and a.state in FINAL_STATES:
            finals[(a.node, a.task_id)].append(a)
    cancels: dict[str, list[float]] = defaultdict(list)
    for t in h.memo(intake):
        if t.method == "CancelTask" and t.task_id is not None and not t.refused:
            cancels[t.task_id].append(t.t_ms)
    for e in h.of(AgentAnswered):
        mine = finals.get((e.node, e.task_id), [])
        if any(a.event.seq < e.seq and a.state in TERMINAL_STATES for a in mine):
            c.count("answered_after_its_task_ended")
            continue
        after = next((a for a in mine if a.event.seq > e.seq), None)
        if after is None:
            c.count("no_final_answer_after_it")     # every_request_answered judges that
            continue
        if any(e.t_ms <= x <= after.t_ms for x in crashes.get(e.node, ())):
            c.count("its_responder_crashed_meanwhile")
            continue
        if after.state == CANCELED \
                and any(x <= after.t_ms for x in cancels.get(e.task_id, ())):
            c.count("canceled_meanwhile")
            continue
        agent = ("asked for input" if e.asks_input else "succeeded") if e.ok else "failed"
        want = (INPUT_REQUIRED if e.asks_input else COMPLETED) if e.ok else FAILED
        c.count(f"agent_{agent.replace(' ', '_')}")
        if after.state != want:
            c.violation(f"{e.node}'s agent {agent} on task {e.task_id} at {e.t_ms:.0f} ms and "
                        f"its next final answer about the task, at {after.t_ms:.0f} ms, said "
                        f"{after.state} (A2A: {want})", e, after.event)


@rule("A2M-ERR-2: a responder the topology bounds to N tasks at once never runs more; "
      "beyond them it answers -32004 responder_unavailable")
def capacity_kept(h: History, c: Collector) -> None:
    """Where a topology gives a responder a `capacity` (the tasks it may run at once), no task
    of it starts while that many run. A task runs from its start — the responder's record
    of a new task or a next turn (`A2mRequestTaken` NEW or CONTINUED), or, for an agent
    written elsewhere, its call to the agent the bench plays (`AgentCalled`) — until the
    bench's agent answered it (`AgentAnswered`) or the responder published a stream-final
    answer about it (an end, a cancel, a question). A next turn of a task that asked for
    input runs again and counts, but is not judged: the bound is on new tasks (the
    topology's word: "refuse a new one beyond it"). A crash or restart of the responder
    forgets what it ran: a count from there on is only ever lower, never a false alarm."""
    started = h.of(RunStarted)
    caps = (started[0].capacities if started else None) or {}
    if not caps:
        return
    marks: list[tuple[int, str, str, str, Event]] = []     # (seq, what, node, task, event)
    for t in h.of(A2mRequestTaken):
        if t.node in caps and t.task_id is not None \
                and t.intake in (Intake.NEW, Intake.CONTINUED):
            marks.append((t.seq, "start", t.node, t.task_id, t))
    for called in h.of(AgentCalled):
        if called.node in caps:
            marks.append((called.seq, "start", called.node, called.task_id, called))
    for e in h.of(AgentAnswered):
        if e.node in caps:
            marks.append((e.seq, "end", e.node, e.task_id, e))
    for a in h.memo(answers):
        if a.node in caps and a.task_id is not None and a.kind != "ERROR" \
                and a.state in FINAL_STATES:
            marks.append((a.event.seq, "end", a.node, a.task_id, a.event))
    for x in (*h.of(NodeCrashed), *h.of(NodeStarted)):
        if x.node in caps:
            marks.append((x.seq, "forget", x.node, "", x))
    running: dict[str, dict[str, Event]] = defaultdict(dict)
    seen: set[tuple[str, str]] = set()
    for _seq, what, node, task, event in sorted(marks, key=lambda m: m[0]):
        now = running[node]
        if what == "forget":
            now.clear()
        elif what == "end":
            now.pop(task, None)
        elif (node, task) in seen:
            now[task] = event
            c.count("next_turns_started_where_bounded")
        else:
            seen.add((node, task))
            c.count("tasks_started_where_bounded")
            if len(now) >= caps[node]:
                c.violation(f"{node} started task {task} at {event.t_ms:.0f} ms while it ran "
                            f"{len(now)} ({', '.join(sorted(now))}): its capacity is "
                            f"{caps[node]}", *now.values(), event)
            now[task] = event
    c.count("responders_bounded", len(caps))


MALFORMED_ANSWER: dict[str, tuple[int, ...]] = {
    "not_json": (-32700,), "not_utf8": (-32700,),                  # parse error
    "array": (-32600,), "null": (-32600,), "no_jsonrpc": (-32600,),  # invalid request
    "unknown_method": (-32601,),                                   # method not found
    "bad_task_id": (-32602, -32005), "no_task_id": (-32602, -32005),   # A2M-RSP-4
    "context_mismatch": (-32602, -32005),                          # A2M-CTX-4
    "no_correlation": (-32005,),                                   # A2M-ERR-2
    "no_response_topic": (),                                       # A2M-RSP-2
    "context_switch": (-32602,),                                   # A2M-CTX-3
    "empty": (-32700, -32600, -32005),                             # A2M-RSP-3: some error
    "binary_correlation": (ANSWERED,),                             # A2M-RR-3: answered
    # MQTT 5 properties in a form the profile forbids: a Response Topic nobody can publish to
    # is no reply path (A2M-RSP-2: dropped, never run); a context property empty, or repeated
    # with a value that differs, is invalid binding metadata (A2M-CTX-4); a payload its
    # Payload Format Indicator calls UTF-8 that is not cannot be parsed (A2M-RSP-3)
    "prop:response_topic:empty": (), "prop:response_topic:wildcard": (),
    "prop:a2a-context-id:empty": (-32602, -32005), "prop:a2a-context-id:twice": (-32602, -32005),
    "prop:payload_format:not_utf8": (-32700,),
}


#: A field of the wrong JSON type (the malformed_request fault's `type:<field>:<type>`
#: cases), by field: JSON-RPC 2.0 §5.1 — not a valid Request object (jsonrpc, id, method,
#: or params not structured) is -32600 Invalid Request, a method's parameters that are not
#: what it takes -32602 Invalid params (A2M-RSP-3: "validate request payloads"); a Task.id
#: not a string is a missing one (A2M-RSP-4), answered as no_task_id is.
WRONG_TYPE_ANSWER: dict[str, tuple[int, ...]] = {
    "jsonrpc": (-32600,), "id": (-32600,), "method": (-32600,), "params": (-32600, -32602),
    "params.message": (-32602,), "params.message.messageId": (-32602,),
    "params.message.role": (-32602,), "params.message.parts": (-32602,),
    "params.message.contextId": (-32602,), "params.message.taskId": (-32602, -32005),
    # (-32601 too: a responder without GetTask or CancelTask has no such method to run)
    "GetTask.params.id": (-32602, -32601), "CancelTask.params.id": (-32602, -32601),
}


#: A field given a value of its own type that the rules forbid (the fault's
#: `value:<field>:<name>` cases), by field: jsonrpc not "2.0" is no JSON-RPC 2.0 Request
#: (-32600); a method the server does not have is -32601 (an empty one, -32600 too); a
#: message's messageId empty, its role no Role, its parts no Parts: -32602; a Task.id
#: empty or a UUID of another version than 4 is what A2M-RSP-4 rejects (-32602, or the
#: binding's -32005); a GetTask's or CancelTask's empty params.id names no task (-32602,
#: A2A's -32001 TaskNotFound, or -32005 as for a SendMessage's missing Task.id; -32601
#: from a responder that has no such method).
WRONG_VALUE_ANSWER: dict[str, tuple[int, ...]] = {
    "jsonrpc": (-32600,), "method": (-32601, -32600), "params.message.messageId": (-32602,),
    "params.message.role": (-32602,), "params.message.parts": (-32602,),
    "params.message.taskId": (-32602, -32005),
    "GetTask.params.id": (-32602, -32001, -32005, -32601),
    "CancelTask.params.id": (-32602, -32001, -32005, -32601),
}


def answer_to(case: str) -> tuple[int, ...] | None:
    """What the profile says a malformed request of `case` gets (MALFORMED_ANSWER, or by
    its field for a wrong-type or a malformed-value case); None: not a malformed case."""
    if case.startswith("type:"):
        return WRONG_TYPE_ANSWER.get(case.split(":")[1])
    if case.startswith("value:"):
        return WRONG_VALUE_ANSWER.get(case.split(":")[1])
    return MALFORMED_ANSWER.get(case)


@rule("A2M-RSP-2, A2M-RSP-3, A2M-RSP-4, A2M-CTX-3, A2M-CTX-4, A2M-ERR-1, A2M-ERR-2: a "
      "malformed request gets the error the profile names, runs nothing, and the responder "
      "goes on serving")
def malformed_requests_refused(h: History, c: Collector) -> None:
    """Each malformed request the bench sent (malformed_request) is answered, on its own
    Response Topic, with a JSON-RPC error of the code MALFORMED_ANSWER names — or not at
    all where it has no Response Topic — within MALFORMED_WITHIN_MS while its responder was
    up; nothing executes its Task.id; and the responder does not die of it (a process
    that ends by itself, or raises, after taking one in). Undecided where the responder
    was down, a fault acted on it or on the broker, or the run ended, before it could
    answer."""
    _hostile(h, c, answer_to, "a malformed request")


@rule("A2M-PROP-2: a valid request carrying an a2a- User Property the profile does not "
      "define is served as if it were not there")
def unknown_properties_ignored(h: History, c: Collector) -> None:
    """Each request of the malformed_request fault's case prop:a2a-unknown:present (valid,
    with an a2a- User Property no part of the profile defines) is answered with no error,
    judged as malformed requests are (SHOULD: Error Handling and Deduplication 3)."""
    _hostile(h, c, IGNORED_ANSWER.get, "a request with an a2a- property unknown to it")


@rule("A2M-BIN-1: a request asking for an artifact mode nobody supports is answered in JSON")
def unknown_artifact_modes_answered_in_json(h: History, c: Collector) -> None:
    """Each request of the malformed_request fault's case prop:a2a-artifact-mode:unknown
    (valid, `a2a-artifact-mode: hologram`) is answered with no error, judged as malformed
    requests are, and nothing published to its Response Topic is other than JSON (the
    tap's reading of the PUBLISH: a payload that is no JSON text is a binary artifact
    chunk, which only a supported `binary` request may get)."""
    _hostile(h, c, ARTIFACT_MODE_ANSWER.get, "a request with an unsupported artifact mode")
    asked = {a.message_id: a for a in h.of(AttackSent)
             if a.attack == "malformed_request" and a.how in ARTIFACT_MODE_ANSWER}
    for a in h.memo(answers):
        token = a.topic.rsplit("/", 1)[-1]
        if token in asked and isinstance(a.event, Wire) and a.event.not_json:
            c.violation(f"{a.node} published a payload that is no JSON to the reply path of "
                        f"a request asking for an unsupported artifact mode", asked[token],
                        a.event)


@rule("A2M-RSP-2, A2M-RSP-4: a refused or dropped request runs nothing")
def refused_requests_run_nothing(h: History, c: Collector) -> None:
    """A request the responder refused (a JSON-RPC error) or dropped (no reply path) is
    never executed: no execution there carries its Correlation Data. A responder that runs
    a request and only then finds it malformed fails this. Of an agent judged from its
    wire, a request is refused when the agent's answer to its Correlation Data was an
    error; it ran that request if it executed the request's Task.id afterwards without
    having taken the task in any other way first."""
    executed = {(e.node, e.message_id) for e in h.of(TaskExecuted)}
    # an execution under the same Correlation Data is the refused request's only if no
    # request that was taken in (NEW) had it: Correlation Data is unique on one reply topic
    # only (A2M-REQ-1), and another requester's may coincide
    started = {(t.node, t.correlation) for t in h.of(A2mRequestTaken)
               if t.intake is Intake.NEW}
    for own in h.of(A2mRequestTaken):
        if own.intake not in (Intake.REFUSED, Intake.DROPPED):
            continue
        c.count("refused" if own.intake is Intake.REFUSED else "dropped")
        if (own.node, own.correlation or "") in executed \
                and (own.node, own.correlation) not in started:
            c.violation(f"{own.node} {own.intake.value.lower()} a request ({own.reason}) and "
                        "executed it all the same", own)
    errors = {(a.node, a.correlation) for a in h.memo(answers)
              if a.kind == "ERROR" and isinstance(a.event, Wire)}
    first_run: dict[tuple[str, str], TaskExecuted] = {}
    for e in h.of(TaskExecuted):
        first_run.setdefault((e.node, e.task_id), e)
    # (before and after by the history's order: a tap's packet and a node's record often
    # share a millisecond)
    served: dict[tuple[str, str], int] = {}      # a task taken in and not refused: its line
    wire_took = [t for t in h.memo(intake) if t.refused is None]
    for t in wire_took:
        if t.task_id is not None and (t.node, t.correlation) not in errors:
            served.setdefault((t.node, t.task_id), t.event.seq)
    for t in wire_took:
        if (t.node, t.correlation) not in errors:
            continue
        c.count("refused")
        run = first_run.get((t.node, t.task_id or ""))
        if run is not None and run.seq > t.event.seq \
                and served.get((t.node, t.task_id or ""), run.seq + 1) > run.seq:
            c.violation(f"{t.node} answered a request for task {t.task_id} with an error and "
                        "executed the task all the same", t.event, run)


#: JSON-RPC errors that say nothing about the request's context: expired, unavailable
TRANSIENT_ERRORS = frozenset({-32003, -32004})
#: JSON-RPC 2.0: method not found — a responder that serves not this method (streaming is an
#: agent's option) says nothing of the request's context by refusing it
METHOD_NOT_FOUND = -32601


@rule("A2M-CTX-2: a request that names a context the responder does not know opens it; it "
      "is not an error")
def new_contexts_are_welcome(h: History, c: Collector) -> None:
    """A SendMessage a requester sent for a task new to the responder, naming a context
    the responder has not seen, is answered as any other (the context begins there), never
    with an error about it: only an expired request or an unavailable responder
    (-32003, -32004) may be refused then. A request refused as a method the responder does
    not serve (-32601: a SendStreamingMessage to one that does not stream) opened no context
    and is not judged here (`refused_for_its_method`)."""
    sent, by_corr = h.memo(_sent), h.memo(_answers_by_path)
    seen_contexts: set[tuple[str, str]] = set()
    seen_tasks: set[tuple[str, str]] = set()
    for t in h.memo(intake):
        fresh_task = t.task_id is not None and (t.node, t.task_id) not in seen_tasks
        fresh_context = t.context_id is not None and (t.node, t.context_id) not in seen_contexts
        if t.task_id is not None:
            seen_tasks.add((t.node, t.task_id))
        if t.context_id is not None:
            seen_contexts.add((t.node, t.context_id))
        if not (fresh_task and fresh_context) or t.correlation is None \
                or t.method not in ("SendMessage", "SendStreamingMessage") \
                or (t.response_topic, t.correlation) not in sent:
            continue
        errors = [a for a in by_corr.get((t.response_topic, t.correlation), ())
                  if a.kind == "ERROR" and a.t_ms >= t.t_ms - EARLY_MS]
        if any(_code(a) == METHOD_NOT_FOUND for a in errors):
            # (nor is its context known to the responder now: its next request opens it)
            c.count("refused_for_its_method")
            seen_tasks.discard((t.node, t.task_id or ""))
            seen_contexts.discard((t.node, t.context_id or ""))
            continue
        c.count("contexts_opened")
        for a in errors:
            code = _code(a)
            if code not in TRANSIENT_ERRORS:
                c.violation(f"{t.node} answered a request opening context {t.context_id} "
                            f"(task {t.task_id}) with error {code}", t.event, a.event)
                break


def _no_intake(h: History) -> str | None:
    took: list[Took] = h.memo(intake)
    sent: list[Answer] = h.memo(answers)
    if took or sent:
        return None
    return "no responder took a request in or answered one"


A2A_REPLIES = Checker(
    "a2a_replies", "A2A over MQTT, responder side: every reply answers a request that was "
    "sent, on its Response Topic, with its Correlation Data; every request taken in is "
    "answered (liveness); refused input runs nothing; a task keeps its context, a task that "
    "ended stays ended, and a task it has is never denied; a task ends as its agent did; one "
    "bounded to N tasks at once runs no more; an a2a- property it does not know, or an "
    "artifact mode it does not support, changes nothing.",
    (replies_answer_a_request, replies_echo_the_task_id, nothing_after_the_final_answer,
     refused_requests_run_nothing, malformed_requests_refused, contexts_are_kept,
     ended_tasks_stay_ended, every_request_answered, known_tasks_stay_known,
     new_contexts_are_welcome, unknown_properties_ignored,
     unknown_artifact_modes_answered_in_json, tasks_end_as_their_agent_did,
     capacity_kept), _no_intake,
    protocols=frozenset({SPEC.name}))
