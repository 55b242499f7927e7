"""Seeded defects (DESIGN §7): variants of the reference node that each reintroduce one
bug from the seeds, so that every checker is shown to fail.

A variant is a `Node` subclass that overrides one named seam of the core; the core has no
flags for them. Each entry says which seed section the bug comes from and which checker
must catch it; `tests/test_variants.py` runs each against its scenario.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from cryptography.exceptions import InvalidSignature

from bench.core import events as ev
from bench.core.auth import (
    FLAT_KID,
    AuthMode,
    SignatureVerdict,
    SignatureVersion,
    _mac,
    sign,
    signed_string,
    verify,
)
from bench.core.commands import CancelTimer, Publish
from bench.core.config import NodeConfig
from bench.core.effects import Effects
from bench.core.envelope import Envelope, Header, Json, canonical_json, encode
from bench.core.inputs import MessageReceived, Restored, Started, TaskFinished, TimerKind
from bench.protocols.a2a_mqtt import SPEC as A2A_SPEC
from bench.protocols.a2a_mqtt import responder as a2m_responder
from bench.protocols.a2a_mqtt.io import Effects as ProfileEffects
from bench.protocols.a2a_mqtt.requester import Operation, Phase, Requester
from bench.protocols.a2a_mqtt.responder import Responder
from bench.protocols.a2a_mqtt.wire import Call, ErrorCode, Method, Props, Refusal, status_item
from bench.protocols.seed import SPEC as SEED_SPEC
from bench.protocols.seed.directory import Resolution, Route, Target
from bench.protocols.seed.gate import Gate, Gates
from bench.protocols.seed.instance import Instance, InstanceEvent, InstanceStatus
from bench.protocols.seed.ledger import LedgerConfig, dedup_key
from bench.protocols.seed.node import Node
from bench.protocols.seed.outbox import Outbound, OutboundState, Outbox
from bench.protocols.seed.payloads import read_body
from bench.protocols.seed.process import ProcessEngine
from bench.protocols.seed.relay import Relay
from bench.protocols.seed.steps import StepDef
from bench.protocols.seed.task import TaskRecord, TaskService


class MemoryDedup60s(Node):
    """Seed 000 §3.2 (A9): the only dedup is a 60 s in-memory window, cleared by a restart,
    and tasks are not bound to their requestId: a delayed QoS1 redelivery runs twice."""

    class _NoIdempotency(TaskService):
        def existing(self, request_id: str) -> TaskRecord | None:
            return None

    task_service_class = _NoIdempotency

    def ledger_config(self) -> LedgerConfig:
        return replace(self.config.ledger, ttl_ms=60_000, durable=False)


class NoDefaultExecutor(Node):
    """Seed 000 §3.3 (C3): an empty roster registers nothing: a mute receiver."""

    registers_default_executor = False


class ReplyToFromAgent(Node):
    """Seed 002 §3.2 (D14): the response is addressed to the request's fromAgentId (a
    business identity) instead of headers.replyNodeId."""

    class _Tasks(TaskService):
        def response_target(self, task: TaskRecord) -> str | None:
            return task.requester_agent_id

    task_service_class = _Tasks


class AgentIdAsNodeId(Node):
    """Seed 000 §2.2: toAgentId used where a nodeId belongs; the message goes to
    `{prefix}/node/{agentId}/inbox`, which nobody subscribes to."""

    class _Outbox(Outbox):
        def resolve(self, envelope: Envelope) -> Target:
            if envelope.target_node_id:
                return super().resolve(envelope)
            return Target(Resolution.EXPLICIT, envelope.to_agent_id, "toAgentId used as nodeId")

    outbox_class = _Outbox


class BroadcastFallback(Node):
    """Seed 002 §5 red line 4: an unresolvable target falls back to a broadcast to every
    known node instead of ending UNDELIVERABLE."""

    class _Outbox(Outbox):
        def on_unresolved(self, fx: Effects, msg: Outbound, reason: str) -> OutboundState:
            nodes = sorted(n for n in self.directory.nodes() if n != self.node_id)
            if not nodes:
                return super().on_unresolved(fx, msg, reason)
            first, *rest = nodes
            state = self._publish(fx, msg, self.topics.inbox(first), "broadcast fallback")
            signed = sign(msg.envelope, self.auth.keys, self.node_id, self.auth.version)
            for other in rest:  # untracked extra copies, as a wildcard broadcast would be
                fx.add(Publish(self.topics.inbox(other), encode(signed), self.qos, False, None))
            return state

    outbox_class = _Outbox


class CrossNamespace(Node):
    """Seed 002 §3.1: canHandle ignores the namespace, so a misaddressed request is
    "helpfully" executed by the wrong namespace's executor."""

    def route_agent(self, to_agent_id: str) -> Route:
        route = super().route_agent(to_agent_id)
        return Route.EXACT if route in (Route.CROSS_NAMESPACE, Route.UNKNOWN_AGENT) else route


class CleanSession(Node):
    """DESIGN §10: the node connects with a clean session, so what the broker queued for it
    while it was down is discarded when it comes back (QoS1 is at-least-once only on a
    persistent session)."""

    persistent_session = False


class GlobalRelayCursor(Node):
    """Seed 002 §6.1: one relay cursor for all streams instead of one per
    conversationId|agentId, so a second agent streaming into the conversation is dropped as
    duplicates."""

    class _Relay(Relay):
        def cursor_for(self, stream: str) -> Any:
            return super().cursor_for("*")

    relay_class = _Relay


class ActiveEmitterFallback(Node):
    """Seed 002 §6.1: with nobody watching the conversation, the relay pushes the event to
    "some active emitter" — another conversation's tab (cross-talk)."""

    class _Relay(Relay):
        def deliver_to(self, conversation_id: str) -> list[str]:
            return super().deliver_to(conversation_id) or sorted(self.subscribers)[:1]

    relay_class = _Relay


class AlwaysRelay(Node):
    """Seed 002 §6: the relay is hung on the event source instead of the local drop point,
    so events cross the network even when someone watches on the executor's own node."""

    class _Relay(Relay):
        def local_watchers(self, conversation_id: str) -> list[str]:
            return []

    relay_class = _Relay


class StaleRoster(Node):
    """Seed 002 §3.1 / §11.1 red line 6: a namespace switch does not rotate
    a2a-agents.json, so two sets of executors are announced."""

    rotates_roster_on_namespace_switch = False


class GateResumesAnyInstance(Node):
    """Seed 002 §7 / 000 §5.7: the resume service looks up "the paused instance" of the
    decision's agent instead of the processInstId it names, and does not check the gate:
    with several instances waiting, a click resumes someone else's process."""

    class _Engine(ProcessEngine):
        def instance_for_decision(self, fx: Effects, process_inst_id: str,
                                  agent_id: str | None) -> Instance | None:
            paused = [i for i in self.instances.values()
                      if i.agent_id == agent_id and i.status is InstanceStatus.PAUSED]
            return paused[0] if paused else super().instance_for_decision(
                fx, process_inst_id, agent_id)

        def gate_matches(self, inst: Instance, gate_id: str) -> bool:
            return True

    process_engine_class = _Engine


class NoRehydration(Node):
    """Seed 000 §5.6: the snapshot is written but never read back; after a restart a
    decision finds no instance in memory and the gate is answered UNKNOWN_INSTANCE."""

    class _Engine(ProcessEngine):
        def rehydrate(self, fx: Effects, process_inst_id: str) -> Instance | None:
            return None

    process_engine_class = _Engine


class ForgetsUnackedDecisions(Node):
    """Written by hand (explore's seed-5 finding led to it; no verdict caught it then): after a
    restart the gate store reloads a DECIDED gate but never sends its decision again, so a
    decision that died with the process, or whose GATE_ACK did, is never acknowledged nor
    given up on, and its instance waits for ever."""

    class _Gates(Gates):
        def resend_after_restart(self, fx: Effects, gate: Gate) -> None:
            return None

    gates_class = _Gates


class SnapshotBeforePaused(Node):
    """Seed 000 §5.6 #17: the snapshot is taken before the status is set, so the
    persisted status of a paused instance is always RUNNING; a restart then treats it as
    interrupted mid-step and the open gate can never resume it."""

    class _Engine(ProcessEngine):
        def pause(self, fx: Effects, inst: Instance, gate_id: str) -> None:
            inst.gate_id = gate_id
            self.persist(fx, inst, "pause")   # still RUNNING on disk
            inst.move(InstanceEvent.PAUSE_AT_GATE)

    process_engine_class = _Engine


class ShallowContextCopy(Node):
    """Seed 004 §一: the context handed to a step (and the template a new instance starts
    from) is a shallow copy, so nested facts and the log are shared: a failed attempt's
    draft survives into the retry, branches see each other, tasks see each other."""

    class _Engine(ProcessEngine):
        def copy_context(self, data: Json) -> Json:
            return dict(data) if isinstance(data, dict) else data

    process_engine_class = _Engine


class FailedSubflowCompleted(Node):
    """Seed 000 §5 (root cause ②): the main loop does not stop on FAILED, so a failed
    sub-flow's parent carries on to the next step and ends COMPLETED."""

    class _Engine(ProcessEngine):
        def on_subflow_failed(self, fx: Effects, inst: Instance, sub: Any, why: str) -> None:
            inst.sub = None
            inst.pc += 1

    process_engine_class = _Engine


class StrictTrustsClaims(Node):
    """Seed 002 §8: "strict" mode that trusts the claimed sender: an unsigned message that
    names a sender is taken at its word, so anyone on the broker can act as anyone."""

    def admits(self, mode: AuthMode, verdict: SignatureVerdict) -> bool:
        if mode is AuthMode.STRICT and verdict is SignatureVerdict.UNSIGNED:
            return True
        return super().admits(mode, verdict)


class PerAgentKeyForAnyAgent(Node):
    """Seed 002 §8: a per-agent key is accepted for whatever agent the message claims, so
    one compromised agent's key signs as every agent (KID_MISMATCH never raised)."""

    def verify_envelope(self, env: Envelope, now_ms: int) -> SignatureVerdict:
        verdict = super().verify_envelope(env, now_ms)
        if verdict is not SignatureVerdict.KID_MISMATCH:
            return verdict
        key = self.config.auth.keys.agent_keys[env.header(Header.KID) or ""]
        sv = env.header(Header.SIG_VERSION)
        version = SignatureVersion(sv) if sv else SignatureVersion.V1
        try:   # the MAC is checked with the kid's key; whose key it is, is not
            _mac(key, signed_string(env, version)).verify(bytes.fromhex(env.header(Header.SIG) or ""))
        except (InvalidSignature, ValueError):
            return SignatureVerdict.BAD_SIGNATURE
        return SignatureVerdict.VERIFIED


class AuditWithoutRecord(Node):
    """DESIGN §5 ("admitted is not blind"): audit mode admits everything but records only
    what verified, so the violations it lets in leave no trace."""

    def record_audit(self, fx: Effects, env: Envelope, verdict: SignatureVerdict) -> None:
        if verdict is SignatureVerdict.VERIFIED:
            super().record_audit(fx, env, verdict)


class SignatureComparedWithEq(Node):
    """Seed 002 §8: the signature is recomputed and compared with `==`, which returns at
    the first differing byte: a timing oracle for forging a MAC byte by byte. No history
    shows it (the verdicts are the same), so it is not a --variant; a test catches it
    (tests/core/test_auth.py: verification must go through the constant-time check)."""

    def verify_envelope(self, env: Envelope, now_ms: int) -> SignatureVerdict:
        sig = env.header(Header.SIG)
        if sig is None:
            return SignatureVerdict.UNSIGNED
        kid = env.header(Header.KID) or ""
        key = self.config.auth.keys.key_for_kid(kid)
        if key is None:
            return SignatureVerdict.UNKNOWN_KID
        if kid != FLAT_KID and kid != env.from_agent_id:
            return SignatureVerdict.KID_MISMATCH
        sv = env.header(Header.SIG_VERSION)
        try:
            version = SignatureVersion(sv) if sv else SignatureVersion.V1
        except ValueError:
            return SignatureVerdict.BAD_SIGNATURE
        if _mac_hex(key, signed_string(env, version)) != sig:   # the bug: early exit
            return SignatureVerdict.BAD_SIGNATURE
        if abs(now_ms - env.timestamp_ms) > self.config.auth.max_skew_ms:
            return SignatureVerdict.STALE
        return SignatureVerdict.VERIFIED


def _mac_hex(key: Any, data: bytes) -> str:
    import hashlib
    import hmac as std_hmac
    return std_hmac.new(key.reveal(), data, hashlib.sha256).hexdigest()


class DuplicateRaises(Node):
    """Seed 000 §3.2: the message store's unique key on messageId makes a redelivered
    message raise (an IntegrityError the handler never catches) instead of being dropped as
    a duplicate: the node's process dies of it on every QoS1 redelivery."""

    def on_duplicate(self, fx: Effects, event: Any, env: Envelope, verdict: Any) -> None:
        raise RuntimeError(f"UNIQUE constraint failed: messages.message_id ({env.message_id})")


class LenientEnvelopes(Node):
    """DESIGN §3 ("never silently re-typed"): a forgiving parser — an envelope's unknown
    fields are dropped and a string field given a number is read as that number's text,
    so the message is taken as if it were well-formed."""

    def _on_message(self, fx: Effects, event: MessageReceived) -> None:
        try:
            raw = json.loads(event.payload)
        except ValueError:
            raw = None
        if isinstance(raw, dict):
            known = {"messageId", "conversationId", "sceneGroupId", "fromAgentId", "toAgentId",
                     "targetNodeId", "messageType", "timestamp", "payload", "headers"}
            fixed = {k: str(v) if k not in ("timestamp", "payload") and isinstance(v, int)
                     and not isinstance(v, bool) else v
                     for k, v in raw.items() if k in known}
            event = replace(event, payload=json.dumps(fixed).encode())
        super()._on_message(fx, event)


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    node_class: type[Node]
    seed_ref: str
    caught_by: str       # the checker that must turn FALSE
    scenario: str        # the scenario (in scenarios/) that exposes it
    #: an A2A-over-MQTT defect: the responder or requester it runs instead of the reference
    responder: type[Responder] = Responder
    requester: type[Requester] = Requester

    @property
    def summary(self) -> str:
        defect = next((c for c in (self.responder, self.requester)
                       if c not in (Responder, Requester)), self.node_class)
        return " ".join((defect.__doc__ or "").split())

    @property
    def alters(self) -> tuple[str, frozenset[str]] | None:
        """The protocol whose reference nodes this defect replaces (its `ProtocolSpec.name`)
        and the roles of those it replaces ("orchestrator", "executor"); None: the
        reference, which replaces nothing."""
        roles = frozenset(role for role, cls, reference in (
            ("executor", self.responder, Responder), ("orchestrator", self.requester, Requester))
            if cls is not reference)
        if roles:
            return A2A_SPEC.name, roles
        if self.node_class is not Node:
            return SEED_SPEC.name, frozenset({"orchestrator", "executor"})
        return None

    def core_for(self, config: NodeConfig) -> Callable[[NodeConfig], Any]:
        """What a host starts for this node: the variant's seed node, or, on an
        A2A-over-MQTT topology, its responder or requester."""
        if config.a2a is None:
            return self.node_class
        return self.responder.for_node if config.a2a.responder else self.requester.for_node


def _v2_without_headers(envelope: Envelope, version: SignatureVersion) -> bytes:
    """Signature v2 over the envelope less its headers: replyNodeId and requestId go
    unsigned (v1 as it is)."""
    if version is SignatureVersion.V1:
        return signed_string(envelope, version)
    body = envelope.to_json()
    body["headers"] = {}
    return b"v2|" + hashlib.sha256(canonical_json(body)).hexdigest().encode("ascii")


class V2HeadersUnsigned(Node):
    """DESIGN §5: a "stronger" signature v2 whose digest covers the payload and the routing
    fields but not the headers: a man in the middle rewrites headers.replyNodeId and the
    answer goes to him, under a signature that still verifies."""

    class _Outbox(Outbox):
        def sign(self, envelope: Envelope) -> Envelope:
            return sign(envelope, self.auth.keys, self.node_id, self.auth.version,
                        _v2_without_headers)

    outbox_class = _Outbox

    def verify_envelope(self, env: Envelope, now_ms: int) -> SignatureVerdict:
        return verify(env, self.config.auth.keys, now_ms, self.config.auth.max_skew_ms,
                      _v2_without_headers)


class MergeInCompletionOrder(Node):
    """Seed 004 (copy-on-write, merged by the scheduler): a parallel step's branches are
    merged as they finish, not in branch order: list-growing merges give each run its own
    context, depending on which branch was faster."""

    class _AsTheyCome(ProcessEngine):
        def merge_order(self, step: StepDef, finished: list[str]) -> list[str]:
            return finished

    process_engine_class = _AsTheyCome


class LedgerBeforeAuth(Node):
    """DESIGN §3 Inbound (the pipeline's order: auth admission, then ledger dedup): a node
    that records a message in its inbound ledger before it checks its signature. An
    attacker on the broker forges envelopes under the messageIds a sender will use next
    (they are predictable); each is refused, and the genuine message is then dropped as
    its DUPLICATE."""

    def on_refused(self, fx: Effects, event: MessageReceived, env: Envelope,
                   verdict: SignatureVerdict) -> None:
        self.ledger.admit(dedup_key(env), fx.now_ms)
        super().on_refused(fx, event, env, verdict)


class TrustsDup(Node):
    """Seed 000 §3.2 (dedup by messageId, whatever the transport says): a node that takes a
    copy flagged DUP for one it never acknowledged — "a redelivery means our PUBACK was
    lost, so we never processed it" — and lets it past its inbound ledger. A two-way cut
    hides it (only what was in flight at the cut comes again); a one-way cut of the node's
    own packets loses the PUBACK of every request it took in, and each comes again."""

    def on_duplicate(self, fx: Effects, event: MessageReceived, env: Envelope,
                     verdict: SignatureVerdict) -> None:
        body = read_body(env)
        if not event.dup or isinstance(body, str):
            super().on_duplicate(fx, event, env, verdict)
            return
        parsed = self.topics.parse(event.topic)
        drop = self._route(fx, env, body, parsed.kind, parsed.key, verdict, event)
        if drop is not None:
            self._drop(fx, event, env, drop, verdict)


class InterruptedUnanswered(Node):
    """DESIGN §3 Tasks: a task found RUNNING after a restart ends FAILED("interrupted") in
    the task table, and its requester is never told: it waits for its timeout (and a
    restart overlapping the request seems to excuse the silence)."""

    class _Mute(TaskService):
        def tell_interrupted(self, fx: Effects, task: TaskRecord) -> None:
            return

    task_service_class = _Mute


# -- the A2A-over-MQTT profile's seeded defects (its agents, not the seed node) -----------------
class A2mDedupInMemory(Responder):
    """A2M-RETRY-3: the responder keeps its tasks in memory only. After a restart it
    neither answers the tasks its crash interrupted nor knows their Task.ids: a retry
    queued meanwhile starts its task again."""

    def _on_started(self, fx: ProfileEffects, inp: Started) -> None:
        super()._on_started(fx, replace(inp, restored=Restored()))


class A2mStuckAfterARestart(Responder):
    """Liveness (A2M-RR-3): started again with tasks on disk, it 'recovers' first: a new
    task is stored SUBMITTED and meant to start once recovery is done, and recovery is never
    marked done. Requests are taken in, retries are answered with the task's state, nothing
    errs and nothing crashes — and no new task is ever worked on or finally answered."""

    recovering = False

    def _on_started(self, fx: ProfileEffects, inp: Started) -> None:
        self.recovering = bool(inp.restored.tasks)
        super()._on_started(fx, inp)

    def _on_send(self, fx: ProfileEffects, call: Call, here: a2m_responder.Watcher,
                 taken: dict[str, Any]) -> None:
        if not self.recovering or call.task_id in self.tasks:
            super()._on_send(fx, call, here, taken)
            return
        task = a2m_responder.TaskRecord(call.task_id, call.context_id,
                                        a2m_responder.TaskState.SUBMITTED, 1,
                                        watchers=(here,), asked_by=(here.path,))
        self._state(fx, task, None, "a new Task.id, held until recovery is done")
        fx.record(ev.A2mRequestTaken(intake=ev.Intake.NEW, method=call.method.value,
                                     task_id=call.task_id, context_id=call.context_id,
                                     **taken))


class A2mGetTaskRunningOnly(Responder):
    """A2M-BASE-2: GetTask looks the task up among those still at work: a task that ended
    (or asks for input) is 'not found' — to a requester following up a task the responder
    had just answered."""

    def _on_get(self, fx: ProfileEffects, call: Call, here: a2m_responder.Watcher,
                taken: dict[str, Any]) -> None:
        task = self.tasks.get(call.task_id)
        if task is not None and task.state not in (a2m_responder.TaskState.SUBMITTED,
                                                   a2m_responder.TaskState.WORKING):
            self._refuse(fx, here.topic, here.correlation, Refusal(
                call.rpc_id, ErrorCode.TASK_NOT_FOUND, f"no task {call.task_id}"),
                here.pooled, {**taken, "method": call.method.value, "task_id": call.task_id})
            return
        super()._on_get(fx, call, here, taken)


class A2mReplyWithoutCorrelation(Responder):
    """A2M-RR-3: replies and stream items go to the Response Topic without the request's
    Correlation Data (the echo forgotten): the requester can match none of them."""

    def _publish(self, fx: ProfileEffects, topic: str, correlation: bytes | None,
                 *rest: Any) -> None:
        super()._publish(fx, topic, None, *rest)


class A2mPooledReplyUnnamed(Responder):
    """A2M-RSP-5: a reply to a pooled request does not say which member answered (no
    a2a-responder-agent-id): the requester must treat it as a protocol error."""

    def _publish(self, fx: ProfileEffects, topic: str, correlation: bytes | None, body: bytes,
                 pooled: bool, *rest: Any) -> None:
        super()._publish(fx, topic, correlation, body, False, *rest)


class A2mRetrySameCorrelation(Requester):
    """A2M-RETRY-2: every attempt of an operation goes out under its first attempt's
    Correlation Data."""

    def correlation_for(self, op: Operation) -> bytes:
        fresh = super().correlation_for(op)
        return bytes.fromhex(op.correlations[0]) if op.correlations else fresh


class A2mStaleBackoff(Requester):
    """A2M-RETRY-4: the backoff timer is left armed when a reply settles the operation, and
    its firing sends the request again (the bug first written into examples/a2a-requester
    by accident, its --bug stale-backoff)."""

    def handle(self, inp: Any) -> list[Any]:
        return [c for c in super().handle(inp)
                if not (isinstance(c, CancelTimer) and c.timer.kind is TimerKind.BACKOFF)]

    def _on_timer(self, fx: Any, inp: Any) -> None:
        op = self.ops.get(inp.timer.key)
        if inp.timer.kind is TimerKind.BACKOFF and op is not None and self.subscribed \
                and op.phase in (Phase.ANSWERED, Phase.SETTLED):
            self._send(fx, op)
            return
        super()._on_timer(fx, inp)


class A2mStatusWithoutContext(Responder):
    """A2M-CTX-1: a stream's status items leave the task's contextId out (the Task a
    SendMessage gets carries it): a streaming requester cannot tell the conversation."""

    def _status(self, fx: ProfileEffects, w: a2m_responder.Watcher,
                task: a2m_responder.TaskRecord) -> None:
        self._publish(fx, w.topic, w.correlation,
                      status_item(w.rpc_id, task.task_id, None, task.state), w.pooled,
                      ev.ReplyKind.STATUS, task.task_id, task.state.value, None, None)


class A2mContextFollowsRequest(Responder):
    """A2M-CTX-3: a request for a task it has that names another context is not refused:
    the task moves to the request's context, and answers it from there on."""

    def _on_send(self, fx: ProfileEffects, call: Call, here: a2m_responder.Watcher,
                 taken: dict[str, Any]) -> None:
        task = self.tasks.get(call.task_id)
        if task is not None and call.context_id is not None:
            self.tasks[call.task_id] = replace(task, context_id=call.context_id)
        super()._on_send(fx, call, here, taken)


class A2mCancelLetsWorkFinish(Responder):
    """A2M-RETRY-3 (a task that ended stays ended): CancelTask answers CANCELED but leaves the
    task WORKING in its table, so the agent's result completes it afterwards — and
    whoever else waits is told COMPLETED."""

    def _on_cancel(self, fx: ProfileEffects, call: Call, here: a2m_responder.Watcher,
                   taken: dict[str, Any]) -> None:
        before = self.tasks.get(call.task_id)
        super()._on_cancel(fx, call, here, taken)
        if before is not None and before.state is a2m_responder.TaskState.WORKING:
            self.tasks[call.task_id] = before


class A2mNextTurnNewContext(Requester):
    """A2M-CTX-5: the answer to an input-required goes out as a new conversation (a fresh
    contextId) under the same Task.id: the responder must refuse it (A2M-CTX-3)."""

    def _ask(self, fx: ProfileEffects, op: Operation, message_id: str) -> None:
        if op.turn > 1 and op.context_id is not None:
            op = replace(op, context_id=f"{op.context_id}-turn{op.turn}")
        super()._ask(fx, op, message_id)


class A2mFollowUpsToThePool(Requester):
    """A2M-REQ-4, A2M-HAND-2: the agent a reply names (a2a-responder-agent-id) is kept but
    never used: GetTask, CancelTask and retries of a pooled task go to the pool again,
    where any member — not the one that has the task — may take them."""

    def _target(self, op: Operation) -> str:
        if op.pool_id is not None:
            return self.config.topics.pool(op.pool_id)
        return super()._target(op)


class A2mRaisesOnANamedReply(Requester):
    """A2M-REQ-4 (a bug written by hand into this requester, then caught by no verdict but by
    chance): the agent a pooled reply names is passed twice to the record of the reply,
    and the requester raises on every reply that names one — its process dies, and the
    next one dies again."""

    def _on_reply(self, fx: ProfileEffects, msg: MessageReceived) -> None:
        props = msg.props
        if props is not None and props.user("a2a-responder-agent-id") is not None:
            raise TypeError("A2mReplyTaken() got multiple values for keyword argument "
                            "'responder_agent_id'")
        super()._on_reply(fx, msg)


class A2mTokenOnSendsOnly(Requester):
    """A2M-REQ-5: the bearer token is attached where messages are sent (SendMessage,
    SendStreamingMessage) and forgotten on GetTask and CancelTask, which a responder that
    requires tokens must then refuse."""

    def bearer_for(self, op: Operation, topic: str, now_ms: float) -> str | None:
        if op.method in (Method.GET_TASK, Method.CANCEL_TASK):
            return None
        return super().bearer_for(op, topic, now_ms)


class A2mTokenExpiryUnchecked(Responder):
    """A2M-RSP-7: the token's signature, issuer, audience and scope are checked, its `exp`
    is not (the JWT library was told not to, and the node's own clock check was never
    written): an expired token is processed."""

    def unauthorized(self, props: Props, now_ms: float) -> str | None:
        return super().unauthorized(props, 0.0)


class A2mDelegateNamesNoOne(Responder):
    """A2M-HAND-1: the agent a card owner hands its tasks over to answers them as it
    answers its own, naming nobody: only a pooled reply says who answered, so the
    requester keeps sending the task's follow-ups to the card owner."""

    def _names_itself(self, pooled: bool) -> bool:
        return pooled


class A2mHandoverDropsTheReplyPath(Responder):
    """A2M-HAND-1, A2M-RR-3: a card owner sends a request on to its delegate with its User
    Properties (the token, the caller's headers) and content type, but as a new PUBLISH
    without its Response Topic and Correlation Data: the delegate cannot answer anybody."""

    def _forwarded(self, props: Props) -> Props:
        return Props(user_properties=props.user_properties, content_type=props.content_type)


class A2mNamedAgentInMemory(Requester):
    """A2M-HAND-2, A2M-REQ-4 (the reference's own bug, found by explore): the agent a reply
    named for a task is kept in memory only; after the requester restarts, the task's
    follow-ups go to the agent first asked (a card owner, a pool) again. Written back into
    the reference as it was before the fix."""

    def _on_started(self, fx: ProfileEffects, inp: Started) -> None:
        super()._on_started(fx, inp)
        self.responder_of.clear()


#: the User Properties the four variants below know (of the profile's, those a request or
#: a reply of the reference carries); any other a2a- one is "unknown" to them
_KNOWN_TO_THEM = frozenset({"a2a-context-id", "a2a-authorization", "a2a-responder-agent-id",
                            "a2a-status", "a2a-status-source"})


def _unknown_a2a(props: Props | None, known: frozenset[str] = _KNOWN_TO_THEM) -> bool:
    return props is not None and any(k.startswith("a2a-") and k not in known
                                     for k, _v in props.user_properties)


class A2mContextPropertyLastValue(Responder):
    """A2M-CTX-4: of a request's a2a-context-id User Properties only the last is compared
    with the payload's contextId (a dict made of the pairs): a first one that differs is
    never seen, and the request runs. The reference's own bug until a2a_bad_properties."""

    def _on_request(self, fx: ProfileEffects, msg: MessageReceived) -> None:
        if msg.props is not None:
            last = msg.props.user("a2a-context-id")
            users = tuple(p for p in msg.props.user_properties if p[0] != "a2a-context-id")
            msg = replace(msg, props=replace(msg.props, user_properties=(
                *users, *((("a2a-context-id", last),) if last is not None else ()))))
        super()._on_request(fx, msg)


class A2mAnyRole(Responder):
    """A2M-RSP-3: a message's role is read as any non-empty string, no value of A2A's Role
    enum asked for: a message whose role is ROLE_ROBOT runs. The reference's own bug until
    a2a_bad_values."""

    def _on_request(self, fx: ProfileEffects, msg: MessageReceived) -> None:
        super()._on_request(fx, replace(msg, payload=msg.payload.replace(
            b'"role": "ROLE_ROBOT"', b'"role": "ROLE_USER"')))


class A2mRepliesToWildcards(Responder):
    """A2M-RSP-2: any Response Topic that is not empty is taken for a reply path, one with a
    wildcard too: the request runs, and its replies go where no broker lets them. The
    reference's own bug until a2a_bad_properties."""

    def no_reply_path(self, response_topic: str | None) -> str | None:
        return None if response_topic else super().no_reply_path(response_topic)


class A2mDropsUnknownProperties(Responder):
    """A2M-PROP-2: a request carrying an a2a- User Property it does not know is dropped
    unanswered (a strict whitelist of the binding's properties, made before a newer one)."""

    def _on_request(self, fx: ProfileEffects, msg: MessageReceived) -> None:
        if not _unknown_a2a(msg.props, _KNOWN_TO_THEM | {"a2a-artifact-mode"}):
            super()._on_request(fx, msg)


class A2mDropsArtifactModes(Responder):
    """A2M-BIN-1: a request asking for an a2a-artifact-mode other than json or binary is
    dropped unanswered, not served in JSON."""

    def _on_request(self, fx: ProfileEffects, msg: MessageReceived) -> None:
        artifacts = None if msg.props is None else msg.props.user("a2a-artifact-mode")
        if artifacts in (None, "json", "binary"):
            super()._on_request(fx, msg)


class A2mCompletesFailedTasks(Responder):
    """A2M-BASE-1: a task whose agent failed is reported COMPLETED (the agent's error as
    its result): every request is answered, every state is one a task may take."""

    def _on_ended(self, fx: ProfileEffects, inp: TaskFinished) -> None:
        if not inp.ok:
            inp = replace(inp, ok=True, result=inp.error or "the agent failed")
        super()._on_ended(fx, inp)


class A2mCapacityIgnored(Responder):
    """The topology's capacity read but never enforced (a configuration key lost on its way
    to the check): the responder starts every new task it is sent, however many run."""

    def _full(self) -> bool:
        return False


class A2mRefusesUnknownReplyProperties(Requester):
    """A2M-PROP-2: a reply carrying an a2a- User Property it does not know is ignored as a
    protocol error: the operation waits out its first-reply wait and retries."""

    def _on_reply(self, fx: ProfileEffects, msg: MessageReceived) -> None:
        if not _unknown_a2a(msg.props):
            super()._on_reply(fx, msg)


class A2mGivesUpWhenRefused(Requester):
    """A2M-RETRY-5: a request whose publish the broker refused (a PUBACK failure reason code)
    is given up at once, NOT_SENT, with its attempts left — not sent again."""

    def _retry_or_give_up(self, fx: Any, op: Operation, why: Any, outcome: Any) -> None:
        if why is ev.AttemptWhy.NOT_ACCEPTED:
            self._settle(fx, op, outcome, None, None)
            return
        super()._retry_or_give_up(fx, op, why, outcome)


class A2mBacksOffTooLong(Requester):
    """A2M-RETRY-1: an unanswered request's backoff is read one step late — 2, 4, 4 s where
    the profile says 1, 2, 4 s (±20 %): every retry comes a second or two after its time."""

    @classmethod
    def for_node(cls, config: NodeConfig) -> Requester:
        made = super().for_node(config)
        backoff = made.config.retry.backoff_ms
        made.config = replace(made.config, retry=replace(
            made.config.retry, backoff_ms=(*backoff[1:], backoff[-1])))
        return made


class A2mStallRepublishes(Requester):
    """A2M-RETRY-7: a stream that brings nothing for the idle wait is recovered by
    publishing the request again (a new attempt, new Correlation Data), not with GetTask."""

    def _follow_up(self, fx: Any, op: Operation) -> None:
        self._send(fx, op)


class A2mStatusNotTheEnd(Requester):
    """A2M-STREAM-2, A2M-STREAM-3: a status update whose state ends the stream (terminal,
    input-required) is taken for one more item: only a Task result ends an operation, so
    a stream that ended on a status waits out its 30 s idle wait."""

    _status = False

    def _on_reply(self, fx: Any, msg: MessageReceived) -> None:
        try:
            body = json.loads(msg.payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            body = None
        result = body.get("result") if isinstance(body, dict) else None
        self._status = isinstance(result, dict) and "statusUpdate" in result
        try:
            super()._on_reply(fx, msg)
        finally:
            self._status = False

    def _settle(self, fx: Any, op: Operation, outcome: ev.A2mOutcome, code: int | None,
                text: str | None) -> None:
        if self._status and outcome is not ev.A2mOutcome.ERROR:
            self._answered(fx, op)
            return
        super()._settle(fx, op, outcome, code, text)

    def _next_turn(self, fx: Any, op: Operation) -> None:
        if not self._status:
            super()._next_turn(fx, op)


REFERENCE = Variant("reference", Node, "-", "-", "quickstart")

VARIANTS: dict[str, Variant] = {v.name: v for v in (
    REFERENCE,
    Variant("memory_dedup_60s", MemoryDedup60s, "000 §3.2 A9", "duplicate_execution",
            "redelivery_restart"),
    Variant("lenient_envelopes", LenientEnvelopes, "DESIGN §3", "robustness",
            "malformed_envelopes"),
    Variant("duplicate_raises", DuplicateRaises, "000 §3.2, DESIGN §3", "robustness",
            "qos1_redelivery"),
    Variant("no_default_executor", NoDefaultExecutor, "000 §3.3 C3", "directory_liveness",
            "empty_directory"),
    Variant("reply_to_from_agent", ReplyToFromAgent, "002 §3.2 D14", "reply_routing",
            "quickstart"),
    Variant("agent_id_as_node_id", AgentIdAsNodeId, "000 §2.2", "targeted_delivery",
            "quickstart"),
    Variant("broadcast_fallback", BroadcastFallback, "002 §5, §11.1 #4", "targeted_delivery",
            "unknown_agent"),
    Variant("cross_namespace", CrossNamespace, "002 §3.1", "targeted_delivery",
            "misaddressed"),
    Variant("stale_roster", StaleRoster, "002 §3.1, §11.1 #6", "directory_liveness",
            "stale_roster"),
    Variant("clean_session", CleanSession, "DESIGN §10", "qos1_delivery", "restart"),
    Variant("global_relay_cursor", GlobalRelayCursor, "002 §6.1", "relay_integrity", "streaming"),
    Variant("active_emitter_fallback", ActiveEmitterFallback, "002 §6.1", "relay_integrity",
            "streaming_unwatched"),
    Variant("always_relay", AlwaysRelay, "002 §6", "relay_locality", "streaming_local"),
    Variant("gate_resumes_any_instance", GateResumesAnyInstance, "002 §7, 000 §5.7",
            "gate_integrity", "gates"),
    Variant("no_rehydration", NoRehydration, "000 §5.6", "gate_integrity",
            "gate_executor_restart"),
    Variant("snapshot_before_paused", SnapshotBeforePaused, "000 §5.6 #17", "gate_integrity",
            "gate_executor_restart"),
    Variant("forgets_unacked_decisions", ForgetsUnackedDecisions, "002 §7, DESIGN §3 gates",
            "gate_integrity", "gate_decision_lost_in_a_crash"),
    Variant("shallow_context_copy", ShallowContextCopy, "004 §一", "context_isolation",
            "context"),
    Variant("failed_subflow_completed", FailedSubflowCompleted, "000 §5 (root cause ②)",
            "context_isolation", "context"),
    Variant("strict_trusts_claims", StrictTrustsClaims, "002 §8", "auth_admission", "attacks"),
    Variant("per_agent_key_any_agent", PerAgentKeyForAnyAgent, "002 §8", "auth_admission",
            "attacks"),
    Variant("audit_without_record", AuditWithoutRecord, "DESIGN §5", "auth_admission",
            "attacks_audit"),
    Variant("interrupted_unanswered", InterruptedUnanswered, "DESIGN §3 Tasks",
            "reply_routing", "process_restart"),
    Variant("v2_headers_unsigned", V2HeadersUnsigned, "DESIGN §5", "auth_admission",
            "tampering_v2"),
    Variant("merge_in_completion_order", MergeInCompletionOrder, "004 (copy-on-write)",
            "context_isolation", "context"),
    Variant("trusts_dup", TrustsDup, "000 §3.2", "duplicate_execution", "partition_one_way"),
    Variant("ledger_before_auth", LedgerBeforeAuth, "DESIGN §3 Inbound", "auth_admission",
            "attacks_ledger"),
    Variant("a2m_dedup_in_memory", Node, "A2M-RETRY-3", "duplicate_execution", "a2a_restart",
            responder=A2mDedupInMemory),
    Variant("a2m_stuck_after_a_restart", Node, "A2M-RR-3", "a2a_replies", "a2a_restart",
            responder=A2mStuckAfterARestart),
    Variant("a2m_get_task_running_only", Node, "A2M-BASE-2", "a2a_replies",
            "a2a_multiturn", responder=A2mGetTaskRunningOnly),
    Variant("a2m_reply_without_correlation", Node, "A2M-RR-3", "a2a_replies",
            "a2a_quickstart", responder=A2mReplyWithoutCorrelation),
    Variant("a2m_retry_same_correlation", Node, "A2M-RETRY-2", "a2a_requests", "a2a_restart",
            requester=A2mRetrySameCorrelation),
    Variant("a2m_stale_backoff", Node, "A2M-RETRY-4", "a2a_requests", "a2a_reply_in_backoff",
            requester=A2mStaleBackoff),
    Variant("a2m_stall_republishes", Node, "A2M-RETRY-7", "a2a_requests", "a2a_stream_stall",
            requester=A2mStallRepublishes),
    Variant("a2m_status_not_the_end", Node, "A2M-STREAM-2, A2M-STREAM-3", "a2a_requests",
            "a2a_streams", requester=A2mStatusNotTheEnd),
    Variant("a2m_pooled_reply_unnamed", Node, "A2M-RSP-5", "a2a_pools", "a2a_pool",
            responder=A2mPooledReplyUnnamed),
    Variant("a2m_status_without_context", Node, "A2M-CTX-1", "a2a_replies", "a2a_multiturn",
            responder=A2mStatusWithoutContext),
    Variant("a2m_context_follows_request", Node, "A2M-CTX-3", "a2a_replies", "a2a_malformed",
            responder=A2mContextFollowsRequest),
    Variant("a2m_cancel_lets_work_finish", Node, "A2M-RETRY-3", "a2a_replies",
            "a2a_streams", responder=A2mCancelLetsWorkFinish),
    Variant("a2m_next_turn_new_context", Node, "A2M-CTX-5", "a2a_requests", "a2a_multiturn",
            requester=A2mNextTurnNewContext),
    Variant("a2m_follow_ups_to_the_pool", Node, "A2M-REQ-4, A2M-HAND-2", "a2a_requests",
            "a2a_pool", requester=A2mFollowUpsToThePool),
    Variant("a2m_raises_on_a_named_reply", Node, "A2M-REQ-4", "a2a_robustness", "a2a_pool",
            requester=A2mRaisesOnANamedReply),
    Variant("a2m_token_on_sends_only", Node, "A2M-REQ-5", "a2a_oauth", "a2a_oauth",
            requester=A2mTokenOnSendsOnly),
    Variant("a2m_token_expiry_unchecked", Node, "A2M-RSP-7", "a2a_oauth", "a2a_oauth",
            responder=A2mTokenExpiryUnchecked),
    Variant("a2m_delegate_names_no_one", Node, "A2M-HAND-1", "a2a_handover", "a2a_handover",
            responder=A2mDelegateNamesNoOne),
    Variant("a2m_handover_drops_the_reply_path", Node, "A2M-HAND-1", "a2a_handover",
            "a2a_handover", responder=A2mHandoverDropsTheReplyPath),
    Variant("a2m_named_agent_in_memory", Node, "A2M-HAND-2", "a2a_requests", "a2a_handover",
            requester=A2mNamedAgentInMemory),
    Variant("a2m_context_property_last_value", Node, "A2M-CTX-4", "a2a_replies",
            "a2a_bad_properties", responder=A2mContextPropertyLastValue),
    Variant("a2m_any_role", Node, "A2M-RSP-3", "a2a_replies", "a2a_bad_values",
            responder=A2mAnyRole),
    Variant("a2m_replies_to_wildcards", Node, "A2M-RSP-2", "a2a_replies", "a2a_bad_properties",
            responder=A2mRepliesToWildcards),
    Variant("a2m_drops_unknown_properties", Node, "A2M-PROP-2", "a2a_replies",
            "a2a_bad_properties", responder=A2mDropsUnknownProperties),
    Variant("a2m_drops_artifact_modes", Node, "A2M-BIN-1", "a2a_replies", "a2a_bad_properties",
            responder=A2mDropsArtifactModes),
    Variant("a2m_gives_up_when_refused", Node, "A2M-RETRY-5", "a2a_requests",
            "a2a_publish_refused", requester=A2mGivesUpWhenRefused),
    Variant("a2m_completes_failed_tasks", Node, "A2M-BASE-1", "a2a_replies", "a2a_streams",
            responder=A2mCompletesFailedTasks),
    Variant("a2m_capacity_ignored", Node, "A2M-ERR-2", "a2a_replies", "a2a_binding_errors",
            responder=A2mCapacityIgnored),
    Variant("a2m_backs_off_too_long", Node, "A2M-RETRY-1", "a2a_requests",
            "a2a_lost_reply_restart", requester=A2mBacksOffTooLong),
    Variant("a2m_refuses_unknown_reply_properties", Node, "A2M-PROP-2", "a2a_requests",
            "a2a_reply_extras", requester=A2mRefusesUnknownReplyProperties),
)}


def variant(name: str) -> Variant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise KeyError(f"unknown variant {name!r}; known: {sorted(VARIANTS)}") from None
