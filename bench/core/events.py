"""The history's schema: one frozen type per event kind, the same fields on every substrate.

An event is what happened, as a value. The core returns the ones it decides (`Record`
commands); hosts, deployments and the nemesis construct the others (`HARNESS` at the end:
a node process started or crashed, a fault acted, a run began). `bench.history` writes
them as JSON lines — `seq`, `tMs`, `node`, `kind`, then the fields in camelCase — and
reads them back into these types, refusing a line that does not fit.

Values only: no I/O, no behaviour. A change here is a change of the history format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Protocol, cast

# the values of the history's categorical fields: checkers read them from here
from bench.core.auth import AuthMode as AuthMode
from bench.core.auth import SignatureVerdict as SignatureVerdict
from bench.core.auth import SignatureVersion as SignatureVersion
from bench.core.envelope import Json
from bench.core.envelope import MessageType as MessageType
from bench.core.frozen import quick_init_module
from bench.core.outcome import DropReason as DropReason
from bench.core.outcome import EventKind
from bench.core.vocabulary import AckStatus as AckStatus
from bench.core.vocabulary import DecidedBy as DecidedBy
from bench.core.vocabulary import Decision as Decision
from bench.core.vocabulary import FlowKind as FlowKind
from bench.core.vocabulary import GateState as GateState
from bench.core.vocabulary import Handler as Handler
from bench.core.vocabulary import InstanceStatus as InstanceStatus
from bench.core.vocabulary import Merge as Merge
from bench.core.vocabulary import OutboundState as OutboundState
from bench.core.vocabulary import RequestOutcome as RequestOutcome
from bench.core.vocabulary import TaskStatus as TaskStatus
from bench.core.vocabulary import TimeoutPolicy as TimeoutPolicy
from bench.core.vocabulary import Trust as Trust
from bench.core.vocabulary import Via as Via


class WarningKind(StrEnum):
    """What a `warning` is about (the values are the history's wording)."""

    UNDELIVERABLE = "undeliverable"
    UNKNOWN_SETTLEMENT = "publish settled for an unknown message"
    MISSING_REPLY_NODE = "missing replyNodeId"
    BAD_PROCESS_DEFINITION = "bad process definition"
    SNAPSHOT_UNREADABLE = "instance snapshot unreadable"
    GATE_RECORD_UNREADABLE = "gate record unreadable"
    STREAM_RECORD_UNREADABLE = "relay stream record unreadable"
    ROSTER_UNREADABLE = "roster unreadable; starting from configuration"
    RESTORE_TASKS = "restore tasks"
    RESTORE_REQUESTS = "restore requests"
    PUBLISH_WITHOUT_CONNECTION = "publish without a connection"


class FaultAction(StrEnum):
    """The effects of a fault a checker reads off `fault_fired.action`, as every substrate
    writes them (the values are the history's wording; other actions are told for people
    and no checker parses them)."""

    BROKER_CRASHED = "broker crashed"              # the simulated broker, its state gone
    BROKER_KILLED = "broker killed (SIGKILL)"      # a real broker process
    BROKER_STOPPED = "broker stopped"              # gracefully, or an external restart
    BROKER_STARTED = "broker started"
    SECOND_CONNECTION_DELIVERY = "delivered on the second connection"

    @property
    def broker_down(self) -> bool:
        return self in (FaultAction.BROKER_CRASHED, FaultAction.BROKER_KILLED,
                        FaultAction.BROKER_STOPPED)


class InstanceCause(StrEnum):
    """Why a process instance changed status: a judge reads this, never the prose."""

    WAITING_AT_GATE = "WAITING_AT_GATE"      # PAUSED at a human step
    COMPLETED = "COMPLETED"                  # every step done
    STEP_FAILED = "STEP_FAILED"              # a step failed its last attempt
    SUBFLOW_FAILED = "SUBFLOW_FAILED"        # a sub-flow failed: so does its parent
    DECIDED_AGAINST = "DECIDED_AGAINST"      # the gate was rejected, or expired with "fail"
    NO_HOME_NODE = "NO_HOME_NODE"            # a human step with nobody to ask
    INTERRUPTED = "INTERRUPTED"              # found RUNNING after a restart
    TASK_ENDED = "TASK_ENDED"                # its task ended from outside (the watchdog)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """The base of every event type. `seq`, `t_ms` and `node` are stamped by the history
    (when written, and filled in when read back); whoever constructs an event leaves them."""

    KIND: ClassVar[EventKind]
    #: Field names whose JSON name is not the camelCase of the attribute.
    JSON_NAMES: ClassVar[dict[str, str]] = {}
    #: Whether fields beyond the declared ones are kept (in `details`) rather than refused.
    OPEN: ClassVar[bool] = False

    seq: int = 0
    t_ms: float = 0.0
    node: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivered(Event):
    """An event about a message the broker delivered: it carries the PUBLISH's flags as the
    client got them (absent for a local delivery), so the history shows how each copy came:
    QoS, DUP (a re-delivery MUST set it, [MQTT-3.3.1-1]), RETAIN and the packet id (a
    re-delivery MUST reuse it, [MQTT-4.4.0-1])."""

    qos: int | None = None
    dup: bool | None = None
    retain: bool | None = None
    packet_id: int | None = None


# -- the node's life and its directory -----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NodeStarted(Event):
    """A node started, at every boot before it connects: a new `boot_id` for this life of the
    node, and the namespace, MQTT client id and signature settings it runs with."""

    KIND = EventKind.NODE_STARTED
    boot_id: str
    namespace: str
    client_id: str
    auth_mode: AuthMode
    signature_version: SignatureVersion
    #: what of the protocol a node not written here implements (FEATURES); absent = all
    features: list[str] | None = None


@dataclass(frozen=True, slots=True)
class Connected(Event):
    """A node's MQTT connection came up (every CONNACK, a reconnect's too) and it subscribes:
    `subscriptions` are the filters of that SUBSCRIBE (its inbox, the directory, its scene
    groups)."""

    KIND = EventKind.CONNECTED
    client_id: str
    session_present: bool
    subscriptions: list[str]


@dataclass(frozen=True, slots=True)
class RosterLoaded(Event):
    """A node loaded its roster at start: its configured executors plus the persisted roster's
    agents of the same namespace (`restored`: those only the persisted roster had), without the
    default executor."""

    KIND = EventKind.ROSTER_LOADED
    agents: list[str]
    restored: list[str]
    namespace: str


@dataclass(frozen=True, slots=True)
class RosterRotated(Event):
    """At start a node found its persisted roster in another namespace: it backed that roster
    up, dropped its agents (`dropped_agents`) and started from its configuration."""

    KIND = EventKind.ROSTER_ROTATED
    from_namespace: str
    to_namespace: str
    dropped_agents: list[str]


@dataclass(frozen=True, slots=True)
class DefaultExecutorRegistered(Event):
    """A node's roster came out empty at start, so it registered the default executor
    (`agent_id`), which serves its own namespace, rather than be a mute receiver."""

    KIND = EventKind.DEFAULT_EXECUTOR_REGISTERED
    agent_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class ExecutorsRegistered(Event):
    """A node's subscription was acknowledged (every SUBACK) and the agents it serves are
    routable: the bench's start-up self-check waits for this, and fails the start when
    `registered` differs from `expected`.

    `agents` includes the default executor. An A2A-over-MQTT responder records its one agent
    here, a requester none."""

    KIND = EventKind.EXECUTORS_REGISTERED
    registered: int
    expected: int
    agents: list[str]
    subscribed: list[str]


@dataclass(frozen=True, slots=True)
class DirectoryUpdated(Delivered):
    """A node took in a directory announcement, its own included: a node online or offline with
    its agents, or (`cleared`) an empty retained message that removed the node's entry; `known`
    is how many agents its directory knows after it.

    `was_known`, for a clear: whether the directory had an entry for that node."""

    KIND = EventKind.DIRECTORY_UPDATED
    node_id: str
    online: bool
    agents: list[str]
    known: int
    cleared: bool | None = None        # an empty retained message cleared the entry
    was_known: bool | None = None


@dataclass(frozen=True, slots=True)
class DirectoryRejected(Delivered):
    """A node refused a directory announcement it could not read (not JSON, a nodeId other than
    its topic's, a field of the wrong type): its directory is unchanged."""

    KIND = EventKind.DIRECTORY_REJECTED
    topic: str
    reason: str


# -- inbound ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class InboundAdmitted(Delivered):
    """A node took an inbound message in and handed it to `handler`: over MQTT, once its
    signature verdict was admitted under the node's auth mode, the ledger found it new and it
    was addressed to this node; `via` local, a message the node sent to itself, which skips the
    signature check and the ledger (`verdict` None)."""

    KIND = EventKind.INBOUND_ADMITTED
    message_id: str
    message_type: MessageType
    from_agent_id: str
    to_agent_id: str | None
    target_node_id: str | None
    request_id: str | None
    origin_node_id: str | None
    reply_node_id: str | None
    verdict: SignatureVerdict | None                # None: delivered locally, no signature to judge
    via: Via                           # mqtt | local
    handler: Handler


@dataclass(frozen=True, slots=True)
class InboundDropped(Delivered):
    """A node dropped an inbound message without handling it, with why (`reason`; `detail` in
    prose): malformed, its own echo, a verdict its auth mode refuses, a duplicate the ledger
    has seen, or not its to take (a foreign topic, another node's or namespace's message, no
    handler for its type).

    Fields the node could not read (a payload that is no envelope) are None, as are the topic,
    size (`bytes`) and MQTT flags of a message it sent itself."""

    KIND = EventKind.INBOUND_DROPPED
    JSON_NAMES = {"size_bytes": "bytes"}
    reason: DropReason                        # DropReason
    detail: str
    topic: str | None
    message_id: str | None
    message_type: MessageType | None
    from_agent_id: str | None
    request_id: str | None
    verdict: SignatureVerdict | None
    size_bytes: int | None


@dataclass(frozen=True, slots=True)
class AuthVerdict(Event):
    """A node in audit mode judged an inbound message's signature: audit admits every verdict
    (`admitted`) and records each one here, so what it lets in is never unseen.

    `kid` and `signer_node` are the key id and the signing node the message's headers claim
    (`x-a2a-kid`, `x-a2a-node`)."""

    KIND = EventKind.AUTH_VERDICT
    message_id: str
    verdict: SignatureVerdict
    mode: AuthMode
    admitted: bool
    from_agent_id: str
    kid: str | None
    signer_node: str | None


@dataclass(frozen=True, slots=True)
class KeysRotated(Event):
    """A node took new signing keys (a key rotation) and signs with them from now on: the
    per-agent key ids, whether it has a flat key, and the key ids whose previous key it still
    accepts (`overlap_kids`); never a key."""

    KIND = EventKind.KEYS_ROTATED
    kids: list[str]
    flat: bool
    overlap_kids: list[str]


@dataclass(frozen=True, slots=True)
class GroupEventReceived(Event):
    """A node admitted an EVENT multicast to one of its scene groups (after its
    `inbound_admitted`)."""

    KIND = EventKind.GROUP_EVENT_RECEIVED
    message_id: str
    scene_group_id: str | None
    from_agent_id: str


# -- outbound and requests ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class OutboundSettled(Event):
    """A node's outgoing message reached its one terminal state: consumed locally without MQTT,
    PUBLISHED (the broker acknowledged it), UNDELIVERABLE (nowhere to send it) or FAILED (the
    client refused or failed to send it, or it could not be encoded).

    `reason` is how its target was resolved (e.g. `explicit targetNodeId`), or why it was not
    sent; `topic` is where it was handed to the client (None: it never was)."""

    KIND = EventKind.OUTBOUND_SETTLED
    message_id: str
    message_type: MessageType
    state: OutboundState                         # OutboundState, terminal
    reason: str
    to_agent_id: str | None
    target_node_id: str | None
    request_id: str | None
    topic: str | None
    #: MQTT 5: the broker's PUBACK reason code (0x10: accepted, no matching subscribers;
    #: 0x80 and above: refused); None on 3.1.1 and for a local or failed send
    reason_code: int | None = None


@dataclass(frozen=True, slots=True)
class RequestSent(Event):
    """A requester node took on a request: in the seed protocol a TASK_REQUEST, recorded before
    it leaves; an A2A-over-MQTT requester records each operation here, its op id as
    `request_id` and its retry budget as the timeout."""

    KIND = EventKind.REQUEST_SENT
    request_id: str
    message_id: str
    from_agent_id: str
    to_agent_id: str
    conversation_id: str | None
    deadline_ms: int                   # on the requester's clock
    timeout_ms: int
    task_timeout_ms: int | None = None  # the task timeout it asks of the executor (timeoutMs)
    target_node_id: str | None = None  # the node it named (targetNodeId); None: the directory's
    #: an A2A-over-MQTT requester written elsewhere: the Task.id the operation is about
    task_id: str | None = None

@dataclass(frozen=True, slots=True)
class RequestSettled(Event):
    """A requester node's request ended, once: the response's status, UNDELIVERABLE,
    SEND_FAILED, or NO_RESPONSE when its timeout passed first (unknown: INFO); `latency_ms`
    counts from its `request_sent`.

    An A2A-over-MQTT requester records its operation's end here too, in these terms
    (`a2m_settled` has the profile's own); one written elsewhere names the operation's
    Task.id (`task_id`), which ties its end to what its wire shows."""

    KIND = EventKind.REQUEST_SETTLED
    request_id: str
    outcome: RequestOutcome                       # RequestOutcome
    latency_ms: int
    response_message_id: str | None
    task_id: str | None = None
    #: the requester's own word for how it ended, where its protocol has more than the
    #: outcome says (a Parley commander's error code, `$noAck`, `$executionStale`, ...)
    code: str | None = None


@dataclass(frozen=True, slots=True)
class ResponseUnmatched(Event):
    """A requester node got a TASK_RESPONSE that matches no pending request — no requestId
    header, an unknown requestId, or one already settled (`reason`) — and ignored it."""

    KIND = EventKind.RESPONSE_UNMATCHED
    request_id: str | None
    message_id: str
    reason: str


# -- tasks -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TaskState(Event):
    """An executor node's task changed state, recorded once the new state is persisted:
    SUBMITTED, then RUNNING as it starts, then one terminal state; `previous` is None for a new
    task, and `error` says why one failed or timed out."""

    KIND = EventKind.TASK_STATE
    task_id: str
    agent_id: str
    state: TaskStatus
    previous: TaskStatus | None
    error: str | None


@dataclass(frozen=True, slots=True)
class TasksRestored(Event):
    """After a restart: the task table read back. `ended` names the tasks found already
    ended whose deadline is still ahead — an end persisted just before a kill may never
    have reached the journal (the record follows the write)."""
    KIND = EventKind.TASKS_RESTORED
    tasks: int
    ended: list[str]


@dataclass(frozen=True, slots=True)
class RequestsRestored(Event):
    """After a restart: the requester's request table read back. `settled` names the
    requests found already settled (with their outcome) whose deadline is still ahead — a
    settlement persisted just before a kill may never have reached the journal (the
    record follows the write)."""
    KIND = EventKind.REQUESTS_RESTORED
    requests: int
    settled: dict[str, str]


@dataclass(frozen=True, slots=True)
class TaskExecuted(Event):
    """An executor node started a new task's work, once per task id and never for a duplicate
    request (a process instance's task included).

    An A2A-over-MQTT responder records it for each new Task.id, with the request's Correlation
    Data in hex as `message_id`."""

    KIND = EventKind.TASK_EXECUTED
    task_id: str
    agent_id: str
    conversation_id: str | None
    message_id: str


@dataclass(frozen=True, slots=True)
class TaskDuplicate(Event):
    """An executor node got a TASK_REQUEST for a task id it already has and did not run it
    again: `action` says what it did instead (the stored result sent again if the task has
    ended, nothing while it runs)."""

    KIND = EventKind.TASK_DUPLICATE
    task_id: str
    message_id: str
    state: TaskStatus
    action: str


@dataclass(frozen=True, slots=True)
class TaskLateResult(Event):
    """An agent's result came for a task that had already ended (its watchdog, a cancel or a
    restart came first) or that the node does not know: recorded, not applied."""

    KIND = EventKind.TASK_LATE_RESULT
    task_id: str
    ok: bool
    state: TaskStatus | None
    reason: str


# -- FLOW-RELAY ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SubscriberAttached(Event):
    """A subscriber (a tab watching a conversation) attached to a node: from now on the node
    delivers it that conversation's stream frames."""

    KIND = EventKind.SUBSCRIBER_ATTACHED
    subscriber_id: str
    conversation_id: str


@dataclass(frozen=True, slots=True)
class SubscriberDetached(Event):
    """A subscriber detached from a node (`conversation_id`: the one it watched; None if it was
    not attached)."""

    KIND = EventKind.SUBSCRIBER_DETACHED
    subscriber_id: str
    conversation_id: str | None


@dataclass(frozen=True, slots=True)
class FlowEmitted(Event):
    """An executor node's agent emitted one event of a task's stream (a token, thinking, a
    step, an artifact; or the node's own complete or error as the task ends), before it is
    coalesced and numbered."""

    KIND = EventKind.FLOW_EMITTED
    stream: str
    conversation_id: str | None        # None only from a node that streams a task without one
    agent_id: str
    task_id: str
    flow_kind: FlowKind
    text: str


@dataclass(frozen=True, slots=True)
class RelayFrame(Event):
    """An executor node made a frame of a task's stream and gave it the stream's next
    `stream_seq` (thinking text coalesced into one frame), before delivering it to local
    subscribers or relaying it to the conversation's home node."""

    KIND = EventKind.RELAY_FRAME
    stream: str
    stream_seq: int
    flow_kind: FlowKind
    text: str
    conversation_id: str | None        # as in FlowEmitted
    task_id: str


@dataclass(frozen=True, slots=True)
class RelaySent(Event):
    """An executor node relayed a stream frame to the conversation's home node as a FLOW_EVENT,
    since no subscriber of the conversation watched on this node."""

    KIND = EventKind.RELAY_SENT
    stream: str
    stream_seq: int
    message_id: str
    conversation_id: str | None        # as in FlowEmitted
    home_node_id: str


@dataclass(frozen=True, slots=True)
class RelayAccepted(Event):
    """A receiving node accepted a stream frame in seq order (its cursor for the stream moved
    to `stream_seq`) and delivers it to the conversation's subscribers."""

    KIND = EventKind.RELAY_ACCEPTED
    stream: str
    stream_seq: int
    text: str
    conversation_id: str | None        # as in FlowEmitted


@dataclass(frozen=True, slots=True)
class RelayDuplicate(Event):
    """A receiving node got a stream frame at or below its cursor for the stream (`cursor`), or
    one it already holds, and dropped it as a duplicate."""

    KIND = EventKind.RELAY_DUPLICATE
    stream: str
    stream_seq: int
    cursor: int
    message_id: str


@dataclass(frozen=True, slots=True)
class RelayGap(Event):
    """A receiving node stopped waiting for the frames `from_seq` to `to_seq` of a stream when
    its reorder window ran out, and moved its cursor past them."""

    KIND = EventKind.RELAY_GAP
    stream: str
    from_seq: int
    to_seq: int
    reason: str


@dataclass(frozen=True, slots=True)
class RelayDelivered(Event):
    """A node delivered a stream frame to one subscriber: `trust` verified if the frame was
    produced on this node, claimed if another node relayed it.

    `subscriber_conversation` is the conversation the subscriber watches, `conversation_id` the
    frame's (relay_locality holds them equal); `lane` is
    `agentId:processInstId:activityId:kind`."""

    KIND = EventKind.RELAY_DELIVERED
    subscriber_id: str
    subscriber_conversation: str | None
    conversation_id: str | None        # as in FlowEmitted
    stream: str
    stream_seq: int
    flow_kind: FlowKind
    text: str
    lane: str
    trust: Trust


@dataclass(frozen=True, slots=True)
class RelayDropped(Event):
    """A flow event that went nowhere, with why: a malformed FLOW_EVENT (message_id), a
    flow of no running task (task_id), a frame with nobody to deliver it to (stream)."""

    KIND = EventKind.RELAY_DROPPED
    reason: str
    message_id: str | None = None
    task_id: str | None = None
    flow_kind: FlowKind | None = None
    stream: str | None = None
    stream_seq: int | None = None


# -- process instances and copy-on-write context ------------------------------------------------------
@dataclass(frozen=True, slots=True)
class InstanceStarted(Event):
    """An executor node started a process instance for a task whose request carried a `process`
    definition: the definition, and its context at version 0 with its `digest` (the first 16
    hex digits of SHA-256 over its canonical JSON)."""

    KIND = EventKind.INSTANCE_STARTED
    process_inst_id: str
    task_id: str
    agent_id: str
    definition: Json
    version: int
    context: Json
    digest: str


@dataclass(frozen=True, slots=True)
class InstanceState(Event):
    """A process instance paused at a human step or ended, COMPLETED or FAILED: `cause` for a
    judge, `reason` in prose; its resumption from a gate is `gate_resumed`.

    An instance found RUNNING at a restart is ended FAILED (INTERRUPTED) from its snapshot;
    `task_id` and `version` are None where the snapshot lacked them."""

    KIND = EventKind.INSTANCE_STATE
    process_inst_id: str
    task_id: str | None
    status: InstanceStatus
    previous: InstanceStatus
    reason: str | None
    version: int | None
    cause: InstanceCause


@dataclass(frozen=True, slots=True)
class InstancePersisted(Event):
    """An executor node wrote a process instance's snapshot to its store (`reason`): at its
    start, after each merge into its main context (`checkpoint`), when it pauses at a gate
    (PAUSED, before the GATE_OPEN leaves) and at its end."""

    KIND = EventKind.INSTANCE_PERSISTED
    process_inst_id: str
    status: InstanceStatus
    version: int
    reason: str
    gate_id: str | None


@dataclass(frozen=True, slots=True)
class InstanceRehydrated(Event):
    """After a restart, an executor node read a process instance back into memory from its
    snapshot, when a gate decision or its task's end named it."""

    KIND = EventKind.INSTANCE_REHYDRATED
    process_inst_id: str
    task_id: str
    status: InstanceStatus
    version: int
    gate_id: str | None
    digest: str


@dataclass(frozen=True, slots=True)
class InstancesRestored(Event):
    """After a restart, an executor node read its process-instance snapshots back: how many,
    and how many are paused at a gate (their tasks stay alive, waiting for a decision)."""

    KIND = EventKind.INSTANCES_RESTORED
    snapshots: int
    paused: int


@dataclass(frozen=True, slots=True)
class StepStarted(Event):
    """An executor node started one attempt of a process step on a fresh copy of its scope's
    snapshot (`snapshot_id` at `base_version`, `base_digest` of the copy), and handed the work
    to the agent.

    `scope` is `main` (the instance's own context) or the id of the sub-flow it runs in; `path`
    is the step's id, or `parallelId/branchId` and `subflowId/stepId` for an inner step;
    `retries` is how many retries the step allows."""

    KIND = EventKind.STEP_STARTED
    process_inst_id: str
    task_id: str
    scope: str
    path: str
    attempt: int
    retries: int
    snapshot_id: str
    parent_snapshot_id: str | None
    base_version: int
    base_digest: str


@dataclass(frozen=True, slots=True)
class StepFinished(Event):
    """An attempt of a process step ended: `ok`, the writes it made to its copy (`ops`), and
    `error` when it failed or its writes could not be applied."""

    KIND = EventKind.STEP_FINISHED
    process_inst_id: str
    scope: str
    path: str
    attempt: int
    ok: bool
    ops: Json
    error: str | None


@dataclass(frozen=True, slots=True)
class StepLate(Event):
    """A step's result came for an attempt that is not running (its instance gone or ended, or
    another attempt under way): recorded, not applied."""

    KIND = EventKind.STEP_LATE
    process_inst_id: str
    path: str
    attempt: int
    ok: bool
    reason: str


@dataclass(frozen=True, slots=True)
class AttemptDiscarded(Event):
    """A failed attempt's working copy was thrown away, its scope's context untouched: the step
    is retried from the same pre-attempt snapshot (`snapshot_id`) while retries are left, else
    the instance fails."""

    KIND = EventKind.ATTEMPT_DISCARDED
    process_inst_id: str
    path: str
    attempt: int
    snapshot_id: str


@dataclass(frozen=True, slots=True)
class ContextForked(Event):
    """A sub-flow step began: its child context (`snapshot_id`) forked as a copy of the
    instance's context at `parent_version`."""

    KIND = EventKind.CONTEXT_FORKED
    process_inst_id: str
    scope: str
    parent_snapshot_id: str
    parent_version: int
    snapshot_id: str
    digest: str


@dataclass(frozen=True, slots=True)
class ContextMerged(Event):
    """A result was merged into a scope's context (`operator`), making a new version
    parent-linked to the last: a step's writes, a gate's decision (under `gates`), or a
    finished sub-flow's context into the instance's; with the new context and its digest."""

    KIND = EventKind.CONTEXT_MERGED
    process_inst_id: str
    scope: str
    path: str
    attempt: int
    operator: Merge
    from_version: int
    version: int
    snapshot_id: str
    parent_snapshot_id: str | None
    ops: Json
    context: Json
    digest: str


@dataclass(frozen=True, slots=True)
class SubflowFinished(Event):
    """A sub-flow step ended: `ok`, and its child context is merged into the instance's; failed
    (`reason`), it is discarded and the instance fails."""

    KIND = EventKind.SUBFLOW_FINISHED
    process_inst_id: str
    step: str
    ok: bool
    reason: str | None


# -- human gates: the executor's side ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GateOpenSent(Event):
    """An executor node's process instance reached a human step: paused and persisted, it sent
    GATE_OPEN for `gate_id` to the conversation's home node."""

    KIND = EventKind.GATE_OPEN_SENT
    gate_id: str
    process_inst_id: str
    activity_id: str
    agent_id: str
    home_node_id: str | None
    message_id: str


@dataclass(frozen=True, slots=True)
class GateDecisionReceived(Event):
    """An executor node got a GATE_DECISION and answers it with a GATE_ACK of `status`, RESUMED
    only if the named instance was paused at this gate; `instance_status` is where that
    instance was (None: no such instance)."""

    KIND = EventKind.GATE_DECISION_RECEIVED
    gate_id: str
    process_inst_id: str
    decision: Decision
    status: AckStatus
    message_id: str
    instance_status: InstanceStatus | None


@dataclass(frozen=True, slots=True)
class GateResumed(Event):
    """An executor node resumed the process instance a decision named, once: approve goes on to
    the next step, reject or expired ends it FAILED; `instance_gate` is the gate it was paused
    at."""

    KIND = EventKind.GATE_RESUMED
    gate_id: str
    process_inst_id: str
    instance_gate: str | None
    decision: Decision
    task_id: str


# -- human gates: the gate store on the orchestrator -------------------------------------------------
@dataclass(frozen=True, slots=True)
class GateOpened(Event):
    """The gate store on a conversation's home node created a gate from the first GATE_OPEN for
    its id, OPEN and persisted, with its deadline and timeout policy; a person is asked next
    (`human_asked`)."""

    KIND = EventKind.GATE_OPENED
    gate_id: str
    process_inst_id: str
    activity_id: str
    agent_id: str
    executor_node_id: str | None
    conversation_id: str | None
    deadline_ms: int                   # on the home node's clock (its open time + timeout_ms)
    on_timeout: TimeoutPolicy
    message_id: str
    timeout_ms: int = 0                # how long from its opening it may stay undecided


@dataclass(frozen=True, slots=True)
class GateOpenDuplicate(Event):
    """The gate store got a GATE_OPEN for a gate it already has and ignored it (`state`: where
    that gate is)."""

    KIND = EventKind.GATE_OPEN_DUPLICATE
    gate_id: str
    state: GateState
    message_id: str


@dataclass(frozen=True, slots=True)
class HumanAsked(Event):
    """The gate store asked the people to decide an open gate (`ask` counts the asks: a restart
    asks again)."""

    KIND = EventKind.HUMAN_ASKED
    gate_id: str
    ask: int
    conversation_id: str | None


@dataclass(frozen=True, slots=True)
class GateClickRejected(Event):
    """The gate store refused a click on a gate it does not know, or with a decision other than
    approve or reject (`reason`)."""

    KIND = EventKind.GATE_CLICK_REJECTED
    gate_id: str
    click: str
    decision: str
    reason: str


@dataclass(frozen=True, slots=True)
class GateAlreadyDecided(Event):
    """A click came for a gate already decided: refused explicitly, and the gate keeps its
    decision (`decided`)."""

    KIND = EventKind.GATE_ALREADY_DECIDED
    gate_id: str
    click: str
    decision: str
    state: GateState
    decided: Decision | None


@dataclass(frozen=True, slots=True)
class GateExpired(Event):
    """An open gate's deadline passed with no decision: its timeout policy decides it (`reject`
    decides reject, `fail` decides expired)."""

    KIND = EventKind.GATE_EXPIRED
    gate_id: str
    policy: TimeoutPolicy
    decision: Decision


@dataclass(frozen=True, slots=True)
class GateDecided(Event):
    """A gate was decided, once: by a person's click or by its expiry (`decided_by`);
    `think_ms` runs from its opening to the decision."""

    KIND = EventKind.GATE_DECIDED
    gate_id: str
    decision: Decision
    decided_by: DecidedBy
    click: str | None
    process_inst_id: str
    think_ms: int


@dataclass(frozen=True, slots=True)
class GateDecisionSent(Event):
    """The gate store sent a gate's decision, persisted first, as a GATE_DECISION to the gate's
    agent; each retry until an ACK is a new message (`attempt`)."""

    KIND = EventKind.GATE_DECISION_SENT
    gate_id: str
    message_id: str
    attempt: int
    decision: Decision | None
    agent_id: str


@dataclass(frozen=True, slots=True)
class GateAcked(Event):
    """The gate store got a GATE_ACK: for a decided gate it stops the retries (`attempts`
    made), for any other it is only noted (`duplicate`); `negative` means the executor resumed
    nothing (UNKNOWN_INSTANCE or NOT_WAITING)."""

    KIND = EventKind.GATE_ACKED
    gate_id: str
    status: AckStatus
    negative: bool
    duplicate: bool
    message_id: str
    attempts: int | None = None


@dataclass(frozen=True, slots=True)
class GateUnacked(Event):
    """The gate store gave up on a decided gate: no GATE_ACK came after its last attempt
    (`attempts`)."""

    KIND = EventKind.GATE_UNACKED
    gate_id: str
    attempts: int
    reason: str


@dataclass(frozen=True, slots=True)
class GatesRestored(Event):
    """After a restart, the gate store read its gates back: how many, how many are open (asked
    again, deadline kept) and how many decided (the decision sent again at once)."""

    KIND = EventKind.GATES_RESTORED
    gates: int
    open: int
    decided: int


# -- the inbound ledger, and warnings ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LedgerFlushed(Event):
    """A node wrote its inbound ledger to its store, on its flush timer when something changed
    (a durable ledger only): a crash forgets what was admitted since the last flush.

    `entries` is how many it holds, `expired` how many this flush dropped for their age;
    `evicted_total` and `expired_total` count since the node started."""

    KIND = EventKind.LEDGER_FLUSHED
    entries: int
    expired: int
    evicted_total: int
    expired_total: int


@dataclass(frozen=True, slots=True)
class LedgerRestored(Event):
    """A node read its inbound ledger back at start: how many entries it holds, any `problem`
    with the stored document, whether the ledger is durable (False: an in-memory window, lost
    at every restart) and how long an entry lives (`ttl_ms`)."""

    KIND = EventKind.LEDGER_RESTORED
    entries: int
    problem: str | None
    durable: bool
    ttl_ms: int


@dataclass(frozen=True, slots=True)
class NodeWarning(Event):
    """Something worth a human's attention that is not a failure of the run."""

    KIND = EventKind.WARNING
    what: WarningKind
    reason: str | None = None
    message_id: str | None = None
    task_id: str | None = None
    to_agent_id: str | None = None
    gate_id: str | None = None
    process_inst_id: str | None = None
    topic: str | None = None
    ok: bool | None = None


CORE: tuple[type[Event], ...] = (
    NodeStarted, Connected, RosterLoaded, RosterRotated, DefaultExecutorRegistered,
    ExecutorsRegistered, DirectoryUpdated, DirectoryRejected, InboundAdmitted, InboundDropped,
    AuthVerdict, KeysRotated, GroupEventReceived, OutboundSettled, RequestSent, RequestSettled,
    ResponseUnmatched, TaskState, TasksRestored, RequestsRestored, TaskExecuted, TaskDuplicate, TaskLateResult,
    SubscriberAttached, SubscriberDetached, FlowEmitted, RelayFrame, RelaySent, RelayAccepted,
    RelayDuplicate, RelayGap, RelayDelivered, RelayDropped, InstanceStarted, InstanceState,
    InstancePersisted, InstanceRehydrated, InstancesRestored, StepStarted, StepFinished,
    StepLate, AttemptDiscarded, ContextForked, ContextMerged, SubflowFinished, GateOpenSent,
    GateDecisionReceived, GateResumed, GateOpened, GateOpenDuplicate, HumanAsked,
    GateClickRejected, GateAlreadyDecided, GateExpired, GateDecided, GateDecisionSent,
    GateAcked, GateUnacked, GatesRestored, LedgerFlushed, LedgerRestored, NodeWarning)


# -- what the harness records around the nodes ------------------------------------------------------
#: How late a timer may fire on a wall clock (a busy two-core host, an event loop's turn):
#: what live and docker runs say in RunStarted.timers_late_ms, and what a history older
#: than that field is judged with.
WALL_CLOCK_TIMERS_LATE_MS = 2_000.0
#: How long after a node decided something on a wall clock the record of it is stamped: a
#: live node's records go out once its batch's group commit is on disk (an fsync, then the
#: event loop's turn). Measured 3 ms on this machine's disk (clock_ahead, publish_failure
#: live on Mosquitto); the rest is room for a busy host. What a rule that times one record
#: against another ("not before") allows for; what a history older than the field gets.
WALL_CLOCK_RECORDS_LATE_MS = 100.0


@dataclass(frozen=True, slots=True)
class RunStarted(Event):
    """The bench began a run, its first event: the scenario, variant, seed, topology and
    substrate, and what the checkers need to know of how and where it ran."""

    KIND = EventKind.RUN_STARTED
    scenario: str
    variant: str
    seed: int
    topology: str
    nodes: int
    mode: str
    broker: str | None = None          # live: the broker's kind, URL, and how nodes run
    broker_url: str | None = None
    node_hosting: str | None = None
    task_timeout_ms: int | None = None  # the task watchdog every node was configured with
    run_id: str | None = None          # an isolated run: in its client ids and topic prefix
    auth_mode: AuthMode | None = None  # the admission mode every node was configured with
    #: how late a timer may fire where the run ran (its substrate's word; 0 when simulated);
    #: None in a history older than the field, judged with a wall clock's allowance
    timers_late_ms: float | None = None
    #: the MQTT client id the deployment gave each node that is not to use its node id (a
    #: topology's client_id, a run's isolation suffix); None in a history older than it
    client_ids: dict[str, str] | None = None
    mqtt: str | None = None            # the MQTT version its clients spoke; None: 3.1.1
    #: how long after a node's decision its record may be stamped (the substrate's word;
    #: 0 when simulated); None in a history older than the field: a wall clock's
    records_late_ms: float | None = None
    #: the protocol the nodes speak: None, the seed documents'; "a2a-mqtt", the
    #: A2A-over-MQTT profile (bench/protocols/a2a_mqtt/)
    protocol: str | None = None
    #: A2A over MQTT: its responders required bearer tokens on requests (None: none did)
    bearer_tokens: bool | None = None
    #: A2A over MQTT: how many tasks each responder the topology bounds (`capacity`) may run
    #: at once; None where no node is bounded
    capacities: dict[str, int] | None = None
    #: the protocol's own settings the run was made with, as its deployment records them
    #: (`deploy.run_fields`; a Parley topology's topics and timing), where no field above
    #: holds them; None: none
    settings: dict[str, Json] | None = None


@dataclass(frozen=True, slots=True)
class WorkloadStarted(Event):
    """Every node is up and the workload's clock starts: fault times, the planned
    duration and the progress a run shows count from here."""

    KIND = EventKind.WORKLOAD_STARTED
    duration_ms: float
    drain_ms: float


@dataclass(frozen=True, slots=True)
class RunInterrupted(Event):
    """The run was stopped before its end (Ctrl-C, SIGTERM): what precedes is all it
    recorded, and verdicts are given on that."""

    KIND = EventKind.RUN_INTERRUPTED
    how: str
    planned_ms: float


@dataclass(frozen=True, slots=True)
class RunFinished(Event):
    """The bench ended the run, once everything it started was stopped: the run's clock when
    its loop ended (`simulated_ms`: simulated time, or the time since the run started when
    live), how many workload operations were planned, and the substrate's statistics."""

    KIND = EventKind.RUN_FINISHED
    OPEN = True                        # plus the substrate's statistics
    simulated_ms: float
    operations: int
    details: Mapping[str, Json] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunStopping(Event):
    """The run is over: the harness stops the nodes now (nothing they do after counts)."""
    KIND = EventKind.RUN_STOPPING


@dataclass(frozen=True, slots=True)
class NodeCrashed(Event):
    """A node died: a fault crashed it (`fault_index`, journaled by the nemesis), it raised
    while handling an input (`error`; it is started again from its data a moment later), or its
    process exited without the bench ending it."""

    KIND = EventKind.NODE_CRASHED
    fault_index: int | None            # None: not a fault's doing (the node raised)
    how: str
    lost_writes: int | None            # sim: store writes lost; live: not known
    error: str | None = None           # the exception, when the node raised


@dataclass(frozen=True, slots=True)
class OpNotIssued(Event):
    """The bench did not issue a workload operation because its node was down: it did not
    happen. `op` is its kind (request, event, tab), `id` its message id (a tab's subscriber
    id)."""

    KIND = EventKind.OP_NOT_ISSUED
    op: str
    id: str
    reason: str


@dataclass(frozen=True, slots=True)
class OpFailed(Event):
    """Issuing an operation threw: it may or may not have happened (INFO)."""

    KIND = EventKind.OP_FAILED
    op: str
    id: str
    error: str


@dataclass(frozen=True, slots=True)
class InputLost(Event):
    """An input for a node (a delivered message, a timer, an operation) arrived while the node
    was down and was lost: `input` is the input's type."""

    KIND = EventKind.INPUT_LOST
    input: str
    reason: str


@dataclass(frozen=True, slots=True)
class HarnessError(Event):
    """The bench, the nemesis or a node process hit an error of its own: an operation a node
    could not carry out, an output line that did not parse, something it could not connect,
    stop or clear, a callback that threw, or the run stopping on an exception."""

    KIND = EventKind.HARNESS_ERROR
    OPEN = True                        # where it happened: an op, an output line, a trace
    error: str
    details: Mapping[str, Json] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SelfCheck(Event):
    """A node process's message store is ready (`store`: where it is), the first event of each
    boot: the bench's start-up self-check prints it as the store's line."""

    KIND = EventKind.SELF_CHECK
    line: str
    store: str


@dataclass(frozen=True, slots=True)
class SelfCheckFailed(Event):
    """The bench's start-up self-check failed for a node: lines were missing or not all its
    executors registered (`lines`: what it printed; `missing`: how many lines it lacked), or,
    `after` a restart, it did not register again in time."""

    KIND = EventKind.SELF_CHECK_FAILED
    lines: list[str] | None = None     # at start-up: the lines it printed
    missing: int | None = None
    after: str | None = None           # "restart": it did not come back


@dataclass(frozen=True, slots=True)
class FaultProxy(Event):
    """The bench put a proxy of its own in front of a node, for link faults or to tap its wire:
    the node connects to `listen`, which forwards to the broker at `upstream`."""

    KIND = EventKind.FAULT_PROXY
    listen: str
    upstream: str
    tls_port: int | None = None   # where the run offers TLS, the port it listens for it on


@dataclass(frozen=True, slots=True)
class HostClock(Event):
    """A host of a `--mode hosts` run, its clock measured against the bench's before the
    run: `offsetMs` added to the bench's clock reads the host's, within ± `boundMs`. Its
    nodes count the run's clock from the run's start read on its own clock, so their events
    are in the run's time within that bound."""

    KIND = EventKind.HOST_CLOCK
    host: str
    address: str
    offset_ms: float
    bound_ms: float
    samples: int


@dataclass(frozen=True, slots=True)
class MqttConnected(Event):
    """A node's MQTT client got its CONNACK, at every connect and reconnect: the client id it
    used, whether the broker kept its session, and what its CONNECT asked for."""

    KIND = EventKind.MQTT_CONNECTED
    client_id: str
    session_present: bool
    broker: str | None = None
    keepalive_s: int | None = None     # what the CONNECT asked for; None: not known
    #: MQTT 5: the Session Expiry Interval the CONNECT asked for; None: 3.1.1 (or not known)
    session_expiry_s: int | None = None


@dataclass(frozen=True, slots=True)
class MqttDisconnected(Event):
    """A node's MQTT client lost its connection to the broker (`reason`, as the client says); a
    running node's client reconnects with backoff."""

    KIND = EventKind.MQTT_DISCONNECTED
    client_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class SessionTakeover(Event):
    """A connection with a client id another connection held took the session over: the
    nodes that opened the old and the new connection."""

    KIND = EventKind.SESSION_TAKEOVER
    client_id: str
    old_label: str
    new_label: str


class TakeoverWillOf(StrEnum):
    """Whose will the broker published at a session takeover."""

    NONE = "none"      # what 3.1.1 implies: nothing closed that had not said goodbye...
    OLD = "old"        # ...or the taken-over connection's, as for any connection it closed
    NEW = "new"        # a defect: the new connection is open ([MQTT-3.1.2-8])
    BOTH = "both"


@dataclass(frozen=True, slots=True)
class TakeoverWill(Event):
    """What the broker published in the moments after a session takeover (the simulated
    broker says; live, the bench reads the offline announcements the nodes got)."""

    KIND = EventKind.TAKEOVER_WILL
    client_id: str
    old_label: str
    new_label: str
    will: TakeoverWillOf


@dataclass(frozen=True, slots=True)
class HumanClicked(Event):
    """A simulated person clicked a decision on a gate, journaled by whoever plays the people
    (the node's host, or the bench) as the click is made, before the node handles it; `click`
    names it `{gateId}/ask{n}/click{k}`."""

    KIND = EventKind.HUMAN_CLICKED
    gate_id: str
    decision: str
    click: str


@dataclass(frozen=True, slots=True)
class AgentCalled(Event):
    """A node whose agents the bench plays handed a task to its agent: the bench's cue to
    answer it (`task_finished`, and the stream as `flow` lines). A process instance's task
    is never handed over whole: its steps are (`step_started`)."""

    KIND = EventKind.AGENT_CALLED
    task_id: str
    agent_id: str
    conversation_id: str | None = None
    #: the task's turn (a multi-turn task's agent is called once per turn); None: the node
    #: does not say, and the bench counts its calls for the task
    turn: int | None = None


@dataclass(frozen=True, slots=True)
class AgentAnswered(Event):
    """The bench, playing a node's agent, gave it the agent's answer for a task
    (`task_finished`: a line to a node written elsewhere, an input to one of this package):
    from here the node owes its requester the task's final answer, and that answer says
    what the agent did. The bench's own observation of the node, never the node's word."""

    KIND = EventKind.AGENT_ANSWERED
    task_id: str
    ok: bool
    #: the agent ended its turn asking the requester for input (ok, `inputRequired`)
    asks_input: bool = False


@dataclass(frozen=True, slots=True)
class Wire(Event):
    """One MQTT packet that crossed a node's wire tap (the proxy in front of it), as the
    bench read it off the wire, not as the node says: `out` from the node towards the
    broker, `in` from the broker to the node. CONNECT, SUBSCRIBE, PUBLISH, PUBACK and
    DISCONNECT are recorded; of a PUBLISH whose payload is a JSON object, the envelope's
    routing fields, read by the tap's own parser (never the node's decoder)."""

    JSON_NAMES = {"size_bytes": "bytes"}
    KIND = EventKind.WIRE
    direction: str
    packet: str
    packet_id: int | None = None
    topic: str | None = None
    qos: int | None = None
    dup: bool | None = None
    retain: bool | None = None
    size_bytes: int | None = None
    client_id: str | None = None          # CONNECT
    clean_session: bool | None = None
    will_topic: str | None = None
    tls: bool | None = None               # a CONNECT that came by TLS (None: plain TCP)
    filters: list[str] | None = None      # SUBSCRIBE
    message_id: str | None = None         # a PUBLISH's envelope
    message_type: str | None = None
    from_agent_id: str | None = None
    to_agent_id: str | None = None
    target_node_id: str | None = None
    conversation_id: str | None = None    # the seed's conversationId; a JSON-RPC contextId
    request_id: str | None = None
    reply_node_id: str | None = None
    origin_node_id: str | None = None
    status: str | None = None             # a TASK_RESPONSE's payload.status
    stream: str | None = None             # a FLOW_EVENT's payload.stream and .seq
    stream_seq: int | None = None
    #: MQTT 5 (None: a 3.1.1 connection): the version, a PUBACK's or SUBACK's reason codes,
    #: a CONNECT's Session Expiry Interval (its clean start is `clean_session`), and a
    #: PUBLISH's properties (responseTopic, correlationData as hex, userProperties as
    #: [name, value] pairs, messageExpiryS, contentType) as they crossed
    mqtt: str | None = None
    reason_codes: list[int] | None = None
    session_expiry_s: int | None = None
    properties: dict[str, Json] | None = None
    #: a PUBLISH whose payload is a JSON-RPC 2.0 object (the A2A-over-MQTT profile's), as
    #: the tap's own parser read it: its method (a request), its error code (an error
    #: reply), the Task.id it names and the task state it carries (a result, a stream item)
    rpc_method: str | None = None
    rpc_error: int | None = None
    task_id: str | None = None
    task_state: str | None = None
    #: a PUBLISH whose payload is no JSON text at all (True; None: it is, or was not read)
    not_json: bool | None = None
    #: a PUBLISH that carried bearer tokens (JWTs) anywhere — its a2a-authorization, another
    #: property, its payload: their fingerprints (sha256, 16 hex digits). The tap records
    #: no token itself: an a2a-authorization value reads "Bearer <fingerprint>"
    tokens: list[str] | None = None
    #: a PUBLISH's payload as the run's protocol's own wire parser read it
    #: (`ProtocolSpec.wire`: never a node's decoder), for a protocol the fields above do
    #: not describe; None: the protocol has no parser, or the payload was not its message
    body: dict[str, Json] | None = None


@dataclass(frozen=True, slots=True)
class FaultStart(Event):
    """Journaled before the fault acts."""

    KIND = EventKind.FAULT_START
    fault: str
    fault_index: int
    at_ms: float
    duration_ms: float | None
    params: Json
    disrupts: bool                     # may legitimately swallow requests in its window


@dataclass(frozen=True, slots=True)
class FaultFired(Event):
    """A fault took effect: `action` says what it did (a checker reads only the FaultAction
    values), the further fields in the fault's own terms; recorded by whoever carried it out
    (the nemesis, a node's host for its client-side faults, the simulated broker)."""

    KIND = EventKind.FAULT_FIRED
    OPEN = True                        # what it did, in the fault's own terms
    fault: str
    fault_index: int | None
    action: str
    details: Mapping[str, Json] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BrokerDown(Event):
    """The broker went away, as the bench's watch saw it (the process it started
    exited, or its own client of an external broker lost the connection and could not
    get it back); `planned`: a fault stopped it."""
    KIND = EventKind.BROKER_DOWN
    how: str
    planned: bool


@dataclass(frozen=True, slots=True)
class BrokerUp(Event):
    """The broker answers again (its process listens, or the watch client reconnected)."""
    KIND = EventKind.BROKER_UP
    planned: bool


@dataclass(frozen=True, slots=True)
class FaultRefused(Event):
    """The nemesis stopped a fault it could not carry out: its script, or one of its steps
    (`step`: the primitive's name, or `script`), refused, with `reason`; it is not said healed,
    as what it did before may still be in effect."""

    KIND = EventKind.FAULT_REFUSED
    fault: str
    fault_index: int
    step: str
    reason: str


@dataclass(frozen=True, slots=True)
class FaultError(Event):
    """A fault's script or one of its steps threw, or the run ended before the fault began or
    finished: the nemesis journals it (`where`: the traceback, if any) and stops the fault, and
    the run goes on."""

    KIND = EventKind.FAULT_ERROR
    fault: str
    fault_index: int
    error: str
    where: str


@dataclass(frozen=True, slots=True)
class FaultHealed(Event):
    """A fault's script ended and its window closed: the nemesis says it is healed."""

    KIND = EventKind.FAULT_HEALED
    fault: str
    fault_index: int


@dataclass(frozen=True, slots=True)
class AttackSent(Event):
    """An attack message, with the verdict an honest verifier gives it (never a key)."""

    KIND = EventKind.ATTACK_SENT
    attack: str
    how: str
    fault_index: int
    message_id: str
    request_id: str | None
    target_node_id: str | None
    to_agent_id: str | None
    claimed_sender: str
    kid: str | None
    honest_verdict: SignatureVerdict
    age_ms: int | None = None
    #: the originNodeId header it carries, where the attack wrote one of its own (a forgery)
    claimed_node: str | None = None


# -- the protocols -------------------------------------------------------------------------------------
#: The seed documents' protocol, which a history that names none spoke (run_started's
#: `protocol`; every other protocol's name is its spec's: bench/protocols/)
SEED = "seed"


class Intake(StrEnum):
    """What a profile responder did with a request it took in."""

    NEW = "NEW"                  # a new task, executed
    DUPLICATE = "DUPLICATE"      # a Task.id it has: its state returned, nothing executed
    CONTINUED = "CONTINUED"      # a task waiting for input, given its next turn
    QUERY = "QUERY"              # GetTask
    CANCEL = "CANCEL"            # CancelTask
    REFUSED = "REFUSED"          # answered with a JSON-RPC error
    DROPPED = "DROPPED"          # no reply path: nothing to answer on
    HANDED_OVER = "HANDED_OVER"  # its task is another agent's (A2M-HAND-1): sent on to it


class ReplyKind(StrEnum):
    """What a profile responder's reply carries: a JSON-RPC result or error, or a stream item."""

    RESULT = "RESULT"            # a JSON-RPC result (a Task)
    ERROR = "ERROR"              # a JSON-RPC error
    STATUS = "STATUS"            # a stream item: TaskStatusUpdateEvent
    ARTIFACT = "ARTIFACT"        # a stream item: TaskArtifactUpdateEvent


@dataclass(frozen=True, slots=True, kw_only=True)
class A2mRequestTaken(Delivered):
    """A request as a profile responder read it, and what it did with it. `correlation` is
    the Correlation Data in hex."""

    KIND = EventKind.A2M_REQUEST_TAKEN
    topic: str
    intake: Intake
    method: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    correlation: str | None = None
    response_topic: str | None = None
    code: int | None = None
    reason: str | None = None
    handed_to: str | None = None   # HANDED_OVER: the agent it was sent on to


@dataclass(frozen=True, slots=True, kw_only=True)
class A2mReplied(Event):
    """A reply or stream item a profile responder published (journaled as it is handed to
    the client: write-ahead, after what it reports is durable)."""

    KIND = EventKind.A2M_REPLIED
    topic: str
    reply: ReplyKind
    correlation: str | None
    task_id: str | None = None
    state: str | None = None      # the A2A task state it carries (TASK_STATE_…)
    code: int | None = None       # an error's JSON-RPC code
    responder_agent_id: str | None = None   # the a2a-responder-agent-id it carries
    context_id: str | None = None           # the Task's contextId it carries


@dataclass(frozen=True, slots=True, kw_only=True)
class A2mTaskState(Event):
    """A profile task moved (A2A states by their wire names)."""

    KIND = EventKind.A2M_TASK_STATE
    task_id: str
    agent_id: str
    state: str
    previous: str | None
    context_id: str | None = None
    reason: str | None = None


class A2mOutcome(StrEnum):
    """How a profile requester's operation ended (the task's state, where a reply said it)."""

    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    REJECTED = "REJECTED"
    INPUT_REQUIRED = "INPUT_REQUIRED"   # stream-final, not terminal: the task waits for a turn
    WORKING = "WORKING"                 # a Task not finished (GetTask, or a retry's answer)
    SUBMITTED = "SUBMITTED"
    AUTH_REQUIRED = "AUTH_REQUIRED"
    ERROR = "ERROR"                     # a JSON-RPC error
    NO_REPLY = "NO_REPLY"               # every attempt timed out (unknown: INFO)
    NOT_SENT = "NOT_SENT"               # no attempt was accepted by the client or broker


class AttemptWhy(StrEnum):
    """Why a profile requester published an attempt."""

    FIRST = "FIRST"
    NO_FIRST_REPLY = "NO_FIRST_REPLY"    # the last attempt got no reply in reply_first_ms
    NOT_ACCEPTED = "NOT_ACCEPTED"        # the client or the broker refused the last attempt
    RESTART = "RESTART"                  # the requester restarted with the operation open


@dataclass(frozen=True, slots=True, kw_only=True)
class A2mAttempt(Event):
    """A profile requester published one attempt of an operation: the first, or a retry
    with new Correlation Data and the same Task.id (A2M-RETRY-2)."""

    KIND = EventKind.A2M_ATTEMPT
    op_id: str
    method: str
    task_id: str
    attempt: int
    correlation: str
    topic: str
    why: AttemptWhy
    #: the Message Expiry Interval it was published with (None: none)
    expiry_s: int | None = None
    context_id: str | None = None     # the contextId its message carries
    #: when the requester sent it, on its own clock (the record is stamped once its batch is
    #: committed: on a live node, later, and by a varying amount)
    sent_ms: int | None = None
    #: it carried a bearer token in `a2a-authorization` (None: tokens not in use; A2M-REQ-5)
    bearer: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class A2mReplyTaken(Delivered):
    """A message on a profile requester's reply topic, and whether it answered an operation
    (`op_id`) or was a protocol error it ignored (`reason`, A2M-REQ-2, A2M-REQ-3)."""

    KIND = EventKind.A2M_REPLY_TAKEN
    topic: str
    correlation: str | None
    op_id: str | None = None
    reply: ReplyKind | None = None
    state: str | None = None
    reason: str | None = None
    responder_agent_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class A2mSettled(Event):
    """A profile requester's operation ended."""

    KIND = EventKind.A2M_SETTLED
    op_id: str
    method: str
    task_id: str
    outcome: A2mOutcome
    attempts: int
    latency_ms: int
    code: int | None = None
    text: str | None = None
    responder_agent_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class A2mPuback(Event):
    """The broker's PUBACK for an attempt, where it said more than Success (MQTT 5: 0x10 no
    matching subscribers, 0x80 and above a refusal)."""

    KIND = EventKind.A2M_PUBACK
    op_id: str
    correlation: str
    reason_code: int
    topic: str


PROFILE: tuple[type[Event], ...] = (A2mRequestTaken, A2mReplied, A2mTaskState, A2mAttempt,
                                    A2mReplyTaken, A2mSettled, A2mPuback)


HARNESS: tuple[type[Event], ...] = (
    RunStarted, WorkloadStarted, RunFinished, RunInterrupted, RunStopping, NodeCrashed, OpNotIssued, OpFailed, InputLost, HarnessError,
    SelfCheck, SelfCheckFailed, FaultProxy, HostClock, MqttConnected, MqttDisconnected, SessionTakeover,
    TakeoverWill,
    HumanClicked, AgentCalled, AgentAnswered, Wire, FaultStart, FaultFired, FaultRefused, FaultError, FaultHealed, AttackSent,
    BrokerDown, BrokerUp)

#: Every kind's type: the schema the history is written and read with.
TYPES: dict[EventKind, type[Event]] = {t.KIND: t for t in CORE + PROFILE + HARNESS}


# -- the codec: a typed event <-> the fields of one history line -------------------------------------
class SchemaError(ValueError):
    """A history line that does not fit its kind's type (the message names kind and field)."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


#: Every enum a field of the schema is typed with, by the name its annotation gives.
_ENUMS: dict[str, type[StrEnum]] = {e.__name__: e for e in (
    WarningKind, InstanceCause, TakeoverWillOf, AuthMode, SignatureVerdict, SignatureVersion,
    Merge, MessageType, DropReason, AckStatus, DecidedBy, Decision, FlowKind, GateState,
    Handler, InstanceStatus, OutboundState, RequestOutcome, TaskStatus, TimeoutPolicy, Trust,
    Via, Intake, ReplyKind, A2mOutcome, AttemptWhy)}
_META = frozenset({"seq", "t_ms", "node"})


class _Open(Protocol):
    """An OPEN event type: fields beyond the declared ones, kept as they came."""

    details: Mapping[str, Json]


@dataclass(frozen=True, slots=True)
class _Slot:
    attr: str
    json: str
    base: str            # the annotation without "| None"
    optional: bool       # None is a value
    required: bool       # no default: the line must carry it


def _plan(cls: type[Event]) -> tuple[_Slot, ...]:
    plan = _PLANS.get(cls)
    if plan is None:
        import dataclasses
        slots = []
        for f in dataclasses.fields(cls):
            if f.name in _META or f.name == "details":
                continue
            annotation = str(f.type)
            optional = annotation.endswith(" | None")
            required = (f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING)
            slots.append(_Slot(f.name, cls.JSON_NAMES.get(f.name, _camel(f.name)),
                               annotation.removesuffix(" | None"), optional, required))
        plan = _PLANS[cls] = tuple(slots)
    return plan


_PLANS: dict[type[Event], tuple[_Slot, ...]] = {}


def fields_of(cls: type[Event]) -> tuple[_Slot, ...]:
    """The fields a history line of `cls` carries after `seq`, `tMs`, `node` and `kind`,
    in order: JSON name, type, whether null is a value, whether the line must carry it
    (what docs/reference/events.md lists)."""
    return _plan(cls)


def to_fields(event: Event) -> dict[str, Json]:
    """The event's fields as a history line carries them (camelCase, JSON values): an
    optional field left unset is omitted; an OPEN event's details follow its fields."""
    write = _WRITERS.get(type(event))
    if write is None:
        write = _WRITERS[type(event)] = _writer(type(event))
    return write(event)


#: kind -> its history line's `kind` (an enum member's `.value` is a property: a recorder
#: reads it a million times at 1,000 nodes)
_KINDS: dict[type[Event], str] = {}


def kind_of(event: Event) -> str:
    """The `kind` of the event's history line (`event.KIND.value`)."""
    kind = _KINDS.get(type(event))
    if kind is None:
        kind = _KINDS[type(event)] = type(event).KIND.value
    return kind


_WRITERS: dict[type[Event], Callable[[Event], dict[str, Json]]] = {}


def _writer(cls: type[Event]) -> Callable[[Event], dict[str, Json]]:
    """`to_fields` for one class, written out field by field from its plan (a loop over the
    plan with getattr cost a recorder a tenth of a 1,000-node run's recording)."""
    body = ["def write(e):", "    out = {}"]
    for s in _plan(cls):
        if s.required:
            body.append(f"    out[{s.json!r}] = e.{s.attr}")
        else:
            body += [f"    v = e.{s.attr}", f"    if v is not None: out[{s.json!r}] = v"]
    body.append("    return with_details(e, out)" if cls.OPEN else "    return out")
    scope: dict[str, Any] = {"with_details": _with_details}
    exec("\n".join(body), scope)   # noqa: S102 - names from the class's own fields
    return cast(Callable[[Event], dict[str, Json]], scope["write"])


def _with_details(event: Event, out: dict[str, Json]) -> dict[str, Json]:
    details = cast(_Open, event).details
    clash = set(details) & (set(out) | {"seq", "tMs", "node", "kind"})
    if clash:
        raise SchemaError(f"{event.KIND.value}: details may not reuse the names {sorted(clash)}")
    out.update(details)
    return out


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_str_list(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_int_list(v: object) -> bool:
    return isinstance(v, list) and all(_is_int(x) for x in v)


def _is_str_dict(v: object) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str)
                                       for k, x in v.items())


def _is_int_dict(v: object) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and _is_int(x) for k, x in v.items())


#: field type -> whether a JSON value is one (a dict lookup per field: reading a history
#: of a million lines checks some ten million)
_CHECKS: dict[str, Callable[[object], bool]] = {
    "str": lambda v: isinstance(v, str), "int": _is_int, "float": _is_number,
    "bool": lambda v: isinstance(v, bool), "list[str]": _is_str_list,
    "list[int]": _is_int_list, "dict[str, str]": _is_str_dict, "dict[str, int]": _is_int_dict,
    "Json": lambda v: True,
    "dict[str, Json]": lambda v: isinstance(v, dict)}


def _check_of(base: str) -> tuple[Callable[[object], bool], Callable[[str], object] | None]:
    """How a field of type `base` is checked, and made from its JSON string (an enum)."""
    check = _CHECKS.get(base)
    if check is not None:
        return check, None
    if base in _ENUMS:
        enum = _ENUMS[base]
        members = enum._value2member_map_

        def is_member(v: object) -> bool:
            try:
                return v in members
            except TypeError:       # a list or an object: unhashable, no member
                return False
        return is_member, enum

    def unknown(v: object) -> bool:
        raise SchemaError(f"no reader for field type {base!r}")
    return unknown, None


#: One field as a reader takes it: JSON name, attribute, check, enum or None, optional,
#: required, type name. A history of a million lines reads some ten million fields.
_Reading = tuple[str, str, Callable[[object], bool], Callable[[str], object] | None, bool,
                 bool, str]
_READERS: dict[str, tuple[type[Event], tuple[_Reading, ...], frozenset[str]]] = {}


def _reader(kind: str) -> tuple[type[Event], tuple[_Reading, ...], frozenset[str]]:
    got = _READERS.get(kind)
    if got is None:
        try:
            cls = TYPES[EventKind(kind)]
        except ValueError:
            raise SchemaError(f"kind={kind!r} is not an event kind of this bench") from None
        fields = tuple((s.json, s.attr, *_check_of(s.base), s.optional, s.required, s.base)
                       for s in _plan(cls))
        got = _READERS[kind] = (cls, fields, frozenset(s.json for s in _plan(cls)))
    return got


def from_fields(kind: str, fields: Mapping[str, Json], *, seq: int = 0, t_ms: float = 0.0,
                node: str = "") -> Event:
    """The typed event of one history line; SchemaError names what does not fit."""
    cls, reading, declared = _reader(kind)
    values: dict[str, object] = {}
    for name, attr, check, enum, optional, required, base in reading:
        if name not in fields:
            if required:
                raise SchemaError(f"{kind}: the field {name!r} is missing")
            continue
        value = fields[name]
        if value is None and optional:
            values[attr] = None
        elif check(value):
            values[attr] = value if enum is None else enum(str(value))
        else:
            raise SchemaError(f"{kind}: {name}={value!r} must be {base}"
                              + (" or null" if optional else ""))
    extra = {k: v for k, v in fields.items() if k not in declared}
    if cls.OPEN:
        values["details"] = extra
    elif extra:
        raise SchemaError(f"{kind}: unknown field(s) {sorted(extra)}")
    return cls(seq=seq, t_ms=t_ms, node=node, **values)


# built per message many times over: see bench.core.frozen
quick_init_module(globals())
