"""The reference node: `Node.handle(input) -> list[Command]`, the one protocol core that
every substrate drives (DESIGN §2).

Inbound pipeline, in DESIGN §3's order: decode → self-loop filter → auth admission →
ledger dedup → route by toAgentId/canHandle → handler. Every drop on it is an
INBOUND_DROPPED event with its reason. No I/O, no clock, no randomness: `now_ms` and
`boot_id` come with the inputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import TypedDict, assert_never

from bench.core import events as ev
from bench.core.auth import AuthMode, KeyRing, SignatureVerdict, admits, verify
from bench.core.commands import (
    Command,
    Connect,
    PersistDocument,
    PersistRecord,
    Publish,
    StartTimer,
    Subscribe,
    Table,
)
from bench.core.config import NodeConfig
from bench.core.effects import Effects
from bench.core.envelope import Envelope, Header, Json, MessageType, Rejection, decode
from bench.core.frozen import replace
from bench.core.inputs import (
    AgentEmitted,
    ConnectionUp,
    GroupEventRequested,
    HumanDecided,
    Input,
    KeysReplaced,
    MessageReceived,
    PublishSettled,
    Started,
    StepReturned,
    Stopping,
    Subscribed,
    SubscriberJoined,
    SubscriberLeft,
    TaskFinished,
    TaskRequested,
    TimerFired,
    TimerId,
    TimerKind,
)
from bench.core.outcome import DropReason
from bench.core.topics import TopicKind
from bench.core.vocabulary import FlowKind, Handler, Via
from bench.protocols.seed.directory import (
    ROSTER_DOCUMENT,
    Directory,
    Roster,
    Route,
    announcement_for,
    load_roster,
    read_announcement,
)
from bench.protocols.seed.gate import GateConfig, Gates
from bench.protocols.seed.ledger import LEDGER_DOCUMENT, InboundLedger, LedgerConfig, dedup_key
from bench.protocols.seed.outbox import Outbox
from bench.protocols.seed.payloads import (
    Body,
    FlowEventBody,
    GateAckBody,
    GateDecisionBody,
    GateOpenBody,
    OpaqueBody,
    TaskResponseBody,
    read_body,
)
from bench.protocols.seed.process import ProcessEngine
from bench.protocols.seed.relay import Flow, Relay, RelayConfig
from bench.protocols.seed.request import Requests
from bench.protocols.seed.task import TaskRecord, TaskService

LEDGER_FLUSH = TimerId(TimerKind.LEDGER_FLUSH)


class NodeState(StrEnum):
    CREATED = "CREATED"
    STARTED = "STARTED"


class NotStarted(RuntimeError):
    """An input arrived before Started: a driver bug."""


class ForeignTimer(RuntimeError):
    """A timer fired that another protocol's agent arms, never this node: a driver bug."""


@dataclass(frozen=True, slots=True)
class Drop:
    reason: DropReason
    detail: str


class Node:
    """One node: roster, directory, ledger, outbox, task service and requester."""

    #: Seeded-defect variants (bench/variants.py) subclass Node and override these
    #: attributes and the methods marked "variants override" to reintroduce a seed's bug.
    rotates_roster_on_namespace_switch = True
    registers_default_executor = True
    persistent_session = True
    outbox_class: type[Outbox] = Outbox
    task_service_class: type[TaskService] = TaskService
    relay_class: type[Relay] = Relay
    process_engine_class: type[ProcessEngine] = ProcessEngine
    gates_class: type[Gates] = Gates

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.topics = config.topics
        self.directory_topic = config.directory_topic
        self.state = NodeState.CREATED
        self.boot_id = ""
        self._seq = 0
        self.directory = Directory()
        self.roster = Roster(config.node_id, config.namespace, config.agents, not config.agents)
        self.ledger = InboundLedger(self.ledger_config())
        self.outbox = self.outbox_class(config.node_id, self.topics, self.directory, config.auth,
                             config.qos, self._deliver_local)
        self.tasks = self.task_service_class(config.node_id, self.outbox, self.new_message_id,
                                 config.task_timeout_ms)
        self.requests = Requests(config.node_id, self.outbox, config.request_timeout_ms)
        self.relay = self.relay_class(config.node_id, RelayConfig(), self._send,
                                      self.new_message_id)
        self.processes = self.process_engine_class(config.node_id, self._send,
                                                   self._task_finished, self.new_message_id)
        self.tasks.start_process = self._start_process
        self.tasks.on_gone = self.processes.on_task_gone
        self.gates = self.gates_class(config.node_id, GateConfig(), self._send,
                                      self.new_message_id)
        self.flows: dict[str, Flow] = {}   # task id -> where its stream goes
        self._streaming: set[str] = set()  # tasks whose flow has emitted something
        self.drops: dict[DropReason, int] = {r: 0 for r in DropReason}

    def _send(self, fx: Effects, env: Envelope, explicit_target_only: bool) -> object:
        return self.outbox.send(fx, env, explicit_target_only=explicit_target_only)

    def ledger_config(self) -> LedgerConfig:
        """The inbound ledger's settings (variants override)."""
        return self.config.ledger

    def route_agent(self, to_agent_id: str) -> Route:
        """Which executor of this node serves `to_agent_id`, if any (variants override)."""
        return self.roster.route(to_agent_id)

    def new_message_id(self) -> str:
        """Unique across restarts because each start brings a fresh boot id."""
        self._seq += 1
        return f"{self.node_id}.{self.boot_id}.{self._seq}"

    # -- the one entry point ----------------------------------------------------------------
    def handle(self, event: Input) -> list[Command]:
        fx = Effects(event.now_ms)
        if self.state is NodeState.CREATED and not isinstance(event, Started):
            raise NotStarted(f"node {self.node_id}: state CREATED cannot take "
                             f"{type(event).__name__}; feed Started first")
        match event:
            case Started():
                self._on_started(fx, event)
            case Stopping():
                pass    # the seed protocol says nothing on leaving: its will and roster do
            case ConnectionUp():
                self._on_connected(fx, event)
            case Subscribed():
                self._on_subscribed(fx, event)
            case MessageReceived():
                self._on_message(fx, event)
            case TimerFired():
                self._on_timer(fx, event.timer)
            case PublishSettled():
                self.outbox.settle(fx, event.message_id, event.ok, event.error, event.reason_code)
                if not event.ok:
                    self.requests.on_publish_failed(fx, event.message_id)
            case TaskRequested():
                self.requests.send(fx, event)
            case TaskFinished():
                self._task_finished(fx, event.task_id, event.ok, event.result, event.error)
            case StepReturned():
                self.processes.on_step_finished(fx, event.instance_id, event.path, event.attempt,
                                                event.ok, list(event.ops))
            case HumanDecided():
                self.gates.on_human(fx, event.gate_id, event.decision, event.click)
            case KeysReplaced():
                self._rotate_keys(fx, event.keys)
            case GroupEventRequested():
                self._send_group_event(fx, event)
            case SubscriberJoined():
                self.relay.attach(fx, event.subscriber_id, event.conversation_id)
            case SubscriberLeft():
                self.relay.detach(fx, event.subscriber_id)
            case AgentEmitted():
                self._on_flow(fx, event)
            case _:
                assert_never(event)
        return fx.commands

    def _task_finished(self, fx: Effects, task_id: str, ok: bool, result: Json,
                       error: str | None) -> None:
        flow = self.flows.pop(task_id, None)
        if flow is not None and task_id in self._streaming:
            self._streaming.discard(task_id)
            # the stream ends with the task: complete or error, after pending thinking
            self.relay.emit(fx, flow, FlowKind.COMPLETE if ok else FlowKind.ERROR, "")
        self.tasks.on_finished(fx, task_id, ok, result, error)

    def _rotate_keys(self, fx: Effects, keys: KeyRing) -> None:
        auth = replace(self.config.auth, keys=keys)
        self.config = replace(self.config, auth=auth)
        self.outbox.auth = auth
        fx.record(ev.KeysRotated(kids=sorted(keys.agent_keys), flat=keys.flat_token is not None,
                                 overlap_kids=sorted(keys.previous)))   # kid names: never a key

    def _start_process(self, fx: Effects, task: TaskRecord) -> None:
        self.processes.start(fx, task.task_id, task.agent_id, task.conversation_id,
                             task.reply_node_id, task.requester_agent_id, task.payload)

    # -- lifecycle ---------------------------------------------------------------------------
    def _on_started(self, fx: Effects, event: Started) -> None:
        if self.state is not NodeState.CREATED:
            raise RuntimeError(f"node {self.node_id}: state {self.state.name} cannot take Started "
                               "(a restart is a new Node built from the durable store)")
        if not event.boot_id:
            raise ValueError(f"node {self.node_id}: Started needs a non-empty boot_id")
        self.state = NodeState.STARTED
        self.boot_id = event.boot_id
        cfg = self.config
        fx.record(ev.NodeStarted(boot_id=event.boot_id, namespace=cfg.namespace,
                                 client_id=cfg.effective_client_id, auth_mode=cfg.auth.mode,
                                 signature_version=cfg.auth.version))
        self._load_roster(fx, event)
        problem = self.ledger.restore(event.restored.ledger, fx.now_ms)
        fx.record(ev.LedgerRestored(entries=len(self.ledger), problem=problem,
                                    durable=self.ledger.config.durable,
                                    ttl_ms=self.ledger.config.ttl_ms))
        offline = announcement_for(self.roster, online=False)
        fx.add(Connect(cfg.effective_client_id, self.directory_topic,
                       _json_bytes(offline.to_json()), clean_session=not self.persistent_session))
        self.directory.apply(announcement_for(self.roster))
        self.relay.restore(fx, dict(event.restored.streams))
        waiting = self.processes.restore(fx, dict(event.restored.instances))
        self.gates.restore(fx, dict(event.restored.gates))
        # the requests it was waiting on first: a task recovered here may end at once and
        # answer a request of this very node, locally, before anything else runs
        requests = self.requests.recover(fx, event.restored.requests)
        tasks = self.tasks.recover(fx, event.restored.tasks, waiting)
        for what, problems in ((ev.WarningKind.RESTORE_REQUESTS, requests),
                               (ev.WarningKind.RESTORE_TASKS, tasks)):
            for p in problems:
                fx.record(ev.NodeWarning(what=what, reason=p))
        fx.add(StartTimer(LEDGER_FLUSH, fx.now_ms + self.ledger.config.flush_interval_ms))

    def _load_roster(self, fx: Effects, event: Started) -> None:
        cfg = self.config
        loaded = load_roster(cfg.node_id, cfg.namespace, cfg.agents, event.restored.roster,
                             rotate_on_switch=self.rotates_roster_on_namespace_switch,
                             register_default=self.registers_default_executor)
        self.roster = loaded.roster
        for p in loaded.problems:
            fx.record(ev.NodeWarning(what=ev.WarningKind.ROSTER_UNREADABLE, reason=p))
        if loaded.rotated_from is not None:
            fx.add(PersistDocument(f"{ROSTER_DOCUMENT}.bak-{loaded.rotated_from}",
                                   event.restored.roster))
            fx.record(ev.RosterRotated(from_namespace=loaded.rotated_from,
                                       to_namespace=cfg.namespace,
                                       dropped_agents=list(loaded.rotated_agents)))
        fx.add(PersistDocument(ROSTER_DOCUMENT, self.roster.to_document()))
        fx.record(ev.RosterLoaded(agents=list(self.roster.agent_ids),
                                  restored=list(loaded.restored), namespace=cfg.namespace))
        if self.roster.default_executor:
            fx.record(ev.DefaultExecutorRegistered(agent_id=self.roster.executor_ids[-1],
                                                   reason="roster is empty; a default executor keeps the node from being "
                             "a mute receiver"))

    def _on_connected(self, fx: Effects, event: ConnectionUp) -> None:
        filters = (self.topics.inbox(self.node_id), *self.config.directory_filters,
                   *(self.topics.group(g) for g in self.config.scene_groups))
        fx.add(Subscribe(filters, self.config.qos))
        fx.record(ev.Connected(client_id=self.config.effective_client_id,
                               session_present=event.session_present, subscriptions=list(filters)))

    def _on_subscribed(self, fx: Effects, event: Subscribed) -> None:
        """Announce the node online only once the broker routes its inbox here: announcing
        on SUBSCRIBE would invite requests into a session that has no subscription yet."""
        self._announce(fx)
        executors = self.roster.executor_ids
        fx.record(ev.ExecutorsRegistered(registered=len(executors), expected=len(executors),
                                         agents=list(executors), subscribed=list(event.filters)))

    def _announce(self, fx: Effects) -> None:
        ann = announcement_for(self.roster)
        self.directory.apply(ann)
        fx.add(Publish(self.directory_topic, _json_bytes(ann.to_json()), 1, True,
                       None))

    def _on_timer(self, fx: Effects, timer: TimerId) -> None:
        match timer.kind:
            case TimerKind.LEDGER_FLUSH:
                self._flush_ledger(fx)
                fx.add(StartTimer(LEDGER_FLUSH, fx.now_ms + self.ledger.config.flush_interval_ms))
            case TimerKind.TASK_WATCHDOG:
                self.tasks.on_watchdog(fx, timer.key)
            case TimerKind.REQUEST_TIMEOUT:
                self.requests.on_timeout(fx, timer.key)
            case TimerKind.THINKING_FLUSH:
                self.relay.flush_thinking(fx, timer.key)
            case TimerKind.REORDER_GAP:
                self.relay.on_gap_timer(fx, timer.key)
            case TimerKind.GATE_EXPIRY:
                self.gates.on_expiry(fx, timer.key)
            case TimerKind.GATE_RETRY:
                self.gates.on_retry(fx, timer.key)
            case TimerKind.FIRST_REPLY | TimerKind.BACKOFF | TimerKind.STREAM_IDLE:
                raise ForeignTimer(f"{self.node_id}: timer {timer} is the A2A-over-MQTT "
                                   "requester's; this node never arms it (a driver bug)")
            case _:
                assert_never(timer.kind)

    def _flush_ledger(self, fx: Effects) -> None:
        expired = self.ledger.expire(fx.now_ms)
        if not self.ledger.dirty or not self.ledger.config.durable:
            return
        fx.add(PersistDocument(LEDGER_DOCUMENT, self.ledger.to_document()))
        self.ledger.mark_flushed()
        fx.record(ev.LedgerFlushed(entries=len(self.ledger), expired=expired,
                                   evicted_total=self.ledger.evicted,
                                   expired_total=self.ledger.expired))

    # -- inbound ------------------------------------------------------------------------------
    def _on_message(self, fx: Effects, event: MessageReceived) -> None:
        parsed = self.topics.parse(event.topic)
        if parsed.kind is TopicKind.DIRECTORY:
            self._on_announcement(fx, event, parsed.key or "")
            return
        if parsed.kind is TopicKind.FOREIGN:
            self._drop(fx, event, None, Drop(DropReason.NOT_MINE, f"topic {event.topic!r} is not an "
                                                                  f"A2A topic under {self.topics.prefix!r}"))
            return
        decoded = decode(event.payload)
        if isinstance(decoded, Rejection):
            self._drop(fx, event, None, Drop(DropReason.MALFORMED,
                                             f"{decoded.code.value}: {decoded.detail}"),
                       message_id=decoded.message_id)
            return
        env = decoded
        body = read_body(env)
        if isinstance(body, str):   # one MALFORMED path for every payload, before admission
            self._drop(fx, event, env, Drop(DropReason.MALFORMED, body))
            return
        if env.header(Header.ORIGIN_NODE_ID) == self.node_id:
            self._drop(fx, event, env, Drop(DropReason.SELF_LOOP, "originNodeId is this node"))
            return
        verdict = self.verify_envelope(env, fx.now_ms)
        mode = self.config.auth.mode
        if mode is AuthMode.AUDIT:
            self.record_audit(fx, env, verdict)
        if not self.admits(mode, verdict):
            self.on_refused(fx, event, env, verdict)
            return
        if not self.ledger.admit(dedup_key(env), fx.now_ms):
            self.on_duplicate(fx, event, env, verdict)
            return
        drop = self._route(fx, env, body, parsed.kind, parsed.key, verdict, event)
        if drop is not None:
            self._drop(fx, event, env, drop, verdict)

    def on_refused(self, fx: Effects, event: MessageReceived, env: Envelope,
                   verdict: SignatureVerdict) -> None:
        """A message the mode does not admit: a recorded AUTH_REJECTED drop, and nothing
        else — the inbound ledger never learns its messageId (variants override)."""
        self._drop(fx, event, env, Drop(DropReason.AUTH_REJECTED,
                                        f"{verdict.value} not admitted in "
                                        f"{self.config.auth.mode.value} mode"), verdict)

    def on_duplicate(self, fx: Effects, event: MessageReceived, env: Envelope,
                     verdict: SignatureVerdict) -> None:
        """A message the ledger has seen: a recorded DUPLICATE drop (variants override)."""
        self._drop(fx, event, env, Drop(DropReason.DUPLICATE,
                                        f"{dedup_key(env)} already in the inbound ledger"), verdict)

    def admits(self, mode: AuthMode, verdict: SignatureVerdict) -> bool:
        """The mode's decision on a verdict (DESIGN §5's matrix; variants override)."""
        return admits(mode, verdict)

    def verify_envelope(self, env: Envelope, now_ms: int) -> SignatureVerdict:
        """What the signature proves (variants override)."""
        return verify(env, self.config.auth.keys, now_ms, self.config.auth.max_skew_ms)

    def record_audit(self, fx: Effects, env: Envelope, verdict: SignatureVerdict) -> None:
        """Audit mode admits everything and records every verdict (variants override)."""
        fx.record(ev.AuthVerdict(message_id=env.message_id, verdict=verdict,
                                 mode=AuthMode.AUDIT, admitted=True,
                                 from_agent_id=env.from_agent_id, kid=env.header(Header.KID),
                                 signer_node=env.header(Header.NODE)))

    def _route(self, fx: Effects, env: Envelope, body: Body, kind: TopicKind, key: str | None,
               verdict: SignatureVerdict | None, came: MessageReceived | None) -> Drop | None:
        """Hand an admitted, first-seen envelope to its handler; a Drop if it is not ours.
        `came` is the MQTT delivery it came in, None for a local one."""
        if kind is TopicKind.GROUP:
            if env.message_type is not MessageType.EVENT:
                return Drop(DropReason.NOT_MINE, f"{env.message_type.value} on a group topic "
                                                 "(only EVENT is multicast)")
            if key not in self.config.scene_groups:
                return Drop(DropReason.NOT_MINE, f"scene group {key!r} is not one of this node's")
            self._admitted(fx, env, verdict, came, handler=Handler.GROUP)
            fx.record(ev.GroupEventReceived(message_id=env.message_id, scene_group_id=key,
                                            from_agent_id=env.from_agent_id))
            return None
        if key != self.node_id or (env.target_node_id and env.target_node_id != self.node_id):
            return Drop(DropReason.NOT_MINE, f"targeted to node {env.target_node_id or key!r}, "
                                             f"this is {self.node_id!r}")
        match body:
            case OpaqueBody() if env.message_type is MessageType.TASK_REQUEST:
                to_agent = env.to_agent_id or ""
                route = self.route_agent(to_agent)
                if route not in (Route.EXACT, Route.DEFAULT_EXECUTOR):
                    return Drop(DropReason.NOT_MINE, f"{route.value}: toAgentId {to_agent!r} is not "
                                                     f"handled here (namespace {self.roster.namespace!r}, "
                                                     f"executors {list(self.roster.executor_ids)})")
                self._admitted(fx, env, verdict, came, handler=Handler(route.value))
                self.tasks.on_request(fx, env, to_agent)
                self._track_flow(env, to_agent)
            case TaskResponseBody():
                self._admitted(fx, env, verdict, came, handler=Handler.REQUESTS)
                self.requests.on_response(fx, env, body)
            case FlowEventBody():
                self._admitted(fx, env, verdict, came, handler=Handler.RELAY)
                self.relay.receive(fx, env, body, local=came is None)
            case GateOpenBody():
                self._admitted(fx, env, verdict, came, handler=Handler.GATES)
                self.gates.on_open(fx, env, body)
            case GateDecisionBody():
                self._admitted(fx, env, verdict, came, handler=Handler.GATES)
                self.processes.on_decision(fx, env, body)
            case GateAckBody():
                self._admitted(fx, env, verdict, came, handler=Handler.GATES)
                self.gates.on_ack(fx, env, body)
            case _:
                return Drop(DropReason.NOT_MINE, f"no handler for {env.message_type.value} on this "
                                                 "node")
        return None

    def _track_flow(self, env: Envelope, agent_id: str) -> None:
        """Remember where the stream of a task started here goes: its conversation's home."""
        task_id = env.header(Header.REQUEST_ID) or env.message_id
        if env.conversation_id and task_id not in self.flows:
            self.flows[task_id] = Flow(task_id, env.conversation_id, agent_id,
                                       env.header(Header.REPLY_NODE_ID), env.from_agent_id,
                                       f"pi-{task_id}")

    def _on_flow(self, fx: Effects, event: AgentEmitted) -> None:
        flow = self.flows.get(event.task_id)
        try:
            kind = FlowKind(event.kind)
        except ValueError:
            raise ValueError(f"node {self.node_id}: flow kind {event.kind!r} is not one of "
                             f"{[k.value for k in FlowKind]}") from None
        if flow is None:
            task = self.tasks.tasks.get(event.task_id)
            fx.record(ev.RelayDropped(
                task_id=event.task_id, flow_kind=kind,
                reason="no running task with that id on this node" if task is None else
                "its task has no conversation to stream to"))
            return
        self._streaming.add(event.task_id)
        self.relay.emit(fx, flow, kind, event.text)

    def _deliver_local(self, fx: Effects, env: Envelope) -> None:
        """LOCAL_CONSUMED: the target is this node; hand it to the handler, no MQTT."""
        body = read_body(env)
        drop = Drop(DropReason.MALFORMED, body) if isinstance(body, str) else \
            self._route(fx, env, body, TopicKind.INBOX, self.node_id, None, None)
        if drop is not None:
            self._drop(fx, None, env, drop)

    def _admitted(self, fx: Effects, env: Envelope, verdict: SignatureVerdict | None,
                  came: MessageReceived | None, handler: Handler) -> None:
        fx.record(ev.InboundAdmitted(message_id=env.message_id, message_type=env.message_type,
                                     from_agent_id=env.from_agent_id, to_agent_id=env.to_agent_id,
                                     target_node_id=env.target_node_id,
                                     request_id=env.header(Header.REQUEST_ID),
                                     origin_node_id=env.header(Header.ORIGIN_NODE_ID),
                                     reply_node_id=env.header(Header.REPLY_NODE_ID),
                                     verdict=verdict,
                                     via=Via.MQTT if came else Via.LOCAL, handler=handler,
                                     **_flags(came)))
        fx.add(PersistRecord(Table.MESSAGES, f"RECV|{env.message_id}", {
            "direction": "RECV", "messageId": env.message_id,
            "messageType": env.message_type.value, "fromAgentId": env.from_agent_id,
            "toAgentId": env.to_agent_id, "targetNodeId": env.target_node_id,
            "conversationId": env.conversation_id, "requestId": env.header(Header.REQUEST_ID),
            "verdict": verdict.value if verdict else None, "atMs": fx.now_ms}))

    def _drop(self, fx: Effects, event: MessageReceived | None, env: Envelope | None, drop: Drop,
              verdict: SignatureVerdict | None = None, message_id: str | None = None) -> None:
        self.drops[drop.reason] += 1
        fx.record(ev.InboundDropped(reason=drop.reason, detail=drop.detail,
                                    topic=event.topic if event else None,
                                    message_id=env.message_id if env else message_id,
                                    message_type=env.message_type if env else None,
                                    from_agent_id=env.from_agent_id if env else None,
                                    request_id=env.header(Header.REQUEST_ID) if env else None,
                                    verdict=verdict,
                                    size_bytes=len(event.payload) if event else None,
                                    **_flags(event)))

    def _on_announcement(self, fx: Effects, event: MessageReceived, node_id: str) -> None:
        if not event.payload:
            # An empty retained message clears the node's announcement (MQTT 3.1.1 §3.3.1.3).
            removed = self.directory.remove(node_id)
            fx.record(ev.DirectoryUpdated(node_id=node_id, online=False, agents=[],
                                          known=len(self.directory), cleared=True,
                                          was_known=removed, **_flags(event)))
            if node_id == self.node_id:
                # Someone cleared this node's own entry while it runs: unannounced, it would
                # be online yet unknown to every peer (a mute receiver). Announce again.
                self._announce(fx)
            return
        ann = read_announcement(bytes(event.payload), node_id)
        if isinstance(ann, str):
            fx.record(ev.DirectoryRejected(topic=event.topic, reason=ann, **_flags(event)))
            return
        self.directory.apply(ann)
        fx.record(ev.DirectoryUpdated(node_id=ann.node_id, online=ann.online,
                                      agents=[a.agent_id for a in ann.agents],
                                      known=len(self.directory), qos=event.qos, dup=event.dup,
                                      retain=event.retain, packet_id=event.packet_id))

    # -- outbound ----------------------------------------------------------------------------
    def _send_group_event(self, fx: Effects, event: GroupEventRequested) -> None:
        env = Envelope(message_id=event.message_id, message_type=MessageType.EVENT,
                       from_agent_id=event.from_agent_id, timestamp_ms=fx.now_ms,
                       scene_group_id=event.scene_group_id, conversation_id=event.conversation_id,
                       payload=event.payload)
        self.outbox.multicast(fx, env)


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")



class _Flags(TypedDict, total=False):
    qos: int
    dup: bool
    retain: bool
    packet_id: int | None


def _flags(came: MessageReceived | None) -> _Flags:
    """The delivery's MQTT flags for the event that records it (none for a local one)."""
    if came is None:
        return {}
    return {"qos": came.qos, "dup": came.dup, "retain": came.retain, "packet_id": came.packet_id}
