"""The enums that name what happened: history event kinds and inbound drop reasons.

Values only. These strings are the history's vocabulary, shared by every substrate and
every checker, so a rename here is a schema change.
"""

from __future__ import annotations

from enum import StrEnum


class EventKind(StrEnum):
    """Kinds of history events (the `kind` field of a history line): what a node records,
    then what the harness records around it. Each has its type in `bench.core.events`."""

    NODE_STARTED = "node_started"
    CONNECTED = "connected"
    ROSTER_LOADED = "roster_loaded"
    ROSTER_ROTATED = "roster_rotated"
    DEFAULT_EXECUTOR_REGISTERED = "default_executor_registered"
    EXECUTORS_REGISTERED = "executors_registered"
    DIRECTORY_UPDATED = "directory_updated"
    DIRECTORY_REJECTED = "directory_rejected"
    # inbound
    INBOUND_ADMITTED = "inbound_admitted"
    INBOUND_DROPPED = "inbound_dropped"
    AUTH_VERDICT = "auth_verdict"
    KEYS_ROTATED = "keys_rotated"
    # outbound
    OUTBOUND_SETTLED = "outbound_settled"
    # tasks (executor side)
    TASK_STATE = "task_state"
    TASK_EXECUTED = "task_executed"
    TASK_DUPLICATE = "task_duplicate"
    TASK_LATE_RESULT = "task_late_result"
    # requests (requester side)
    REQUEST_SENT = "request_sent"
    REQUEST_SETTLED = "request_settled"
    RESPONSE_UNMATCHED = "response_unmatched"
    GROUP_EVENT_RECEIVED = "group_event_received"
    # FLOW-RELAY
    SUBSCRIBER_ATTACHED = "subscriber_attached"
    SUBSCRIBER_DETACHED = "subscriber_detached"
    FLOW_EMITTED = "flow_emitted"
    RELAY_FRAME = "relay_frame"
    RELAY_SENT = "relay_sent"
    RELAY_ACCEPTED = "relay_accepted"
    RELAY_DUPLICATE = "relay_duplicate"
    RELAY_GAP = "relay_gap"
    RELAY_DELIVERED = "relay_delivered"
    RELAY_DROPPED = "relay_dropped"
    # process instances and copy-on-write context (executor side)
    INSTANCE_STARTED = "instance_started"
    INSTANCE_STATE = "instance_state"
    INSTANCE_PERSISTED = "instance_persisted"
    INSTANCE_REHYDRATED = "instance_rehydrated"
    INSTANCES_RESTORED = "instances_restored"
    STEP_STARTED = "step_started"
    STEP_FINISHED = "step_finished"
    STEP_LATE = "step_late"
    ATTEMPT_DISCARDED = "attempt_discarded"
    CONTEXT_FORKED = "context_forked"
    CONTEXT_MERGED = "context_merged"
    SUBFLOW_FINISHED = "subflow_finished"
    # human gates: executor side
    GATE_OPEN_SENT = "gate_open_sent"
    GATE_DECISION_RECEIVED = "gate_decision_received"
    GATE_RESUMED = "gate_resumed"
    # human gates: the gate store on the orchestrator
    GATE_OPENED = "gate_opened"
    GATE_OPEN_DUPLICATE = "gate_open_duplicate"
    HUMAN_ASKED = "human_asked"
    GATE_CLICK_REJECTED = "gate_click_rejected"
    GATE_ALREADY_DECIDED = "gate_already_decided"
    GATE_EXPIRED = "gate_expired"
    GATE_DECIDED = "gate_decided"
    GATE_DECISION_SENT = "gate_decision_sent"
    GATE_ACKED = "gate_acked"
    GATE_UNACKED = "gate_unacked"
    GATES_RESTORED = "gates_restored"
    # ledger
    LEDGER_FLUSHED = "ledger_flushed"
    LEDGER_RESTORED = "ledger_restored"
    WARNING = "warning"
    # what the harness records around the nodes: the run, node processes and their
    # clients, the simulated people, the nemesis and the attacker
    RUN_STARTED = "run_started"
    RUN_FINISHED = "run_finished"
    RUN_INTERRUPTED = "run_interrupted"
    WORKLOAD_STARTED = "workload_started"
    RUN_STOPPING = "run_stopping"
    TASKS_RESTORED = "tasks_restored"
    REQUESTS_RESTORED = "requests_restored"
    NODE_CRASHED = "node_crashed"
    OP_NOT_ISSUED = "op_not_issued"
    OP_FAILED = "op_failed"
    INPUT_LOST = "input_lost"
    HARNESS_ERROR = "harness_error"
    SELF_CHECK = "self_check"
    SELF_CHECK_FAILED = "self_check_failed"
    FAULT_PROXY = "fault_proxy"
    HOST_CLOCK = "host_clock"
    MQTT_CONNECTED = "mqtt_connected"
    MQTT_DISCONNECTED = "mqtt_disconnected"
    SESSION_TAKEOVER = "session_takeover"
    TAKEOVER_WILL = "takeover_will"
    BROKER_DOWN = "broker_down"
    BROKER_UP = "broker_up"
    HUMAN_CLICKED = "human_clicked"
    AGENT_CALLED = "agent_called"
    AGENT_ANSWERED = "agent_answered"
    WIRE = "wire"
    FAULT_START = "fault_start"
    FAULT_FIRED = "fault_fired"
    FAULT_REFUSED = "fault_refused"
    FAULT_ERROR = "fault_error"
    FAULT_HEALED = "fault_healed"
    ATTACK_SENT = "attack_sent"
    # the A2A-over-MQTT profile's nodes (bench/protocols/a2a_mqtt/): what a responder took in,
    # what it answered, where its tasks went
    A2M_REQUEST_TAKEN = "a2m_request_taken"
    A2M_REPLIED = "a2m_replied"
    A2M_TASK_STATE = "a2m_task_state"
    # ... and what a requester sent, took back and concluded
    A2M_ATTEMPT = "a2m_attempt"
    A2M_REPLY_TAKEN = "a2m_reply_taken"
    A2M_SETTLED = "a2m_settled"
    A2M_PUBACK = "a2m_puback"


class DropReason(StrEnum):
    """Why an inbound message was not handled. Every drop carries one (DESIGN §3)."""

    MALFORMED = "MALFORMED"
    SELF_LOOP = "SELF_LOOP"
    AUTH_REJECTED = "AUTH_REJECTED"
    DUPLICATE = "DUPLICATE"
    NOT_MINE = "NOT_MINE"
