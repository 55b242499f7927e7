"""The enums that name what happened: history event kinds and inbound drop reasons.

Values only. These strings are the history's vocabulary, shared by every substrate and
every checker, so a rename here is a schema change.
"""

from __future__ import annotations

from enum import Enum


class EventKind(str, Enum):
    """Kinds of history events a node records (the `kind` field of a history line)."""

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
    # ledger
    LEDGER_FLUSHED = "ledger_flushed"
    LEDGER_RESTORED = "ledger_restored"
    WARNING = "warning"


class DropReason(str, Enum):
    """Why an inbound message was not handled. Every drop carries one (DESIGN §3)."""

    MALFORMED = "MALFORMED"
    SELF_LOOP = "SELF_LOOP"
    AUTH_REJECTED = "AUTH_REJECTED"
    DUPLICATE = "DUPLICATE"
    NOT_MINE = "NOT_MINE"
