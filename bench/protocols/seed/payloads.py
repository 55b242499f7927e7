"""The payload of each message type, read once — before admission — into a typed body.

The envelope codec checks the envelope; this checks what a handler will rely on in the
payload (a FLOW_EVENT's stream and seq, a gate message's ids and decision, a response's
status). A payload that does not fit is one path: the node drops the message MALFORMED
with the problem, whatever its type, and no handler ever sees it. Types whose payload is
the task's business (a TASK_REQUEST's input, an EVENT's body) pass as they are. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.core.envelope import Envelope, Json, MessageType
from bench.core.frozen import quick_init_module
from bench.core.vocabulary import AckStatus, Decision, FlowKind, TimeoutPolicy

#: The task outcomes a TASK_RESPONSE may carry (DESIGN §3 Tasks: the terminal states).
TASK_OUTCOMES = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")


@dataclass(frozen=True, slots=True)
class FlowEventBody:
    stream: str
    seq: int
    kind: FlowKind
    text: str
    lane: str


@dataclass(frozen=True, slots=True)
class GateOpenBody:
    gate_id: str
    process_inst_id: str
    activity_id: str
    agent_id: str
    prompt: str
    timeout_ms: int
    on_timeout: TimeoutPolicy


@dataclass(frozen=True, slots=True)
class GateDecisionBody:
    gate_id: str
    process_inst_id: str
    decision: Decision


@dataclass(frozen=True, slots=True)
class GateAckBody:
    gate_id: str
    status: AckStatus


@dataclass(frozen=True, slots=True)
class TaskResponseBody:
    status: str                 # one of TASK_OUTCOMES
    payload: Json               # the whole payload, handed to whoever waits for the response


@dataclass(frozen=True, slots=True)
class OpaqueBody:
    """A payload the protocol does not look into (the task's or the event's own business)."""

    payload: Json


Body = (FlowEventBody | GateOpenBody | GateDecisionBody | GateAckBody | TaskResponseBody
        | OpaqueBody)


class _Bad(ValueError):
    pass


def _text(p: dict[str, Json], key: str, what: str) -> str:
    value = p.get(key)
    if not isinstance(value, str) or not value:
        raise _Bad(f"{what} needs {key} (a non-empty string)")
    return value


def _positive(p: dict[str, Json], key: str, what: str) -> int:
    value = p.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise _Bad(f"{what} needs {key} (an integer > 0)")
    return value


def _one_of(p: dict[str, Json], key: str, values: tuple[str, ...], what: str) -> str:
    value = p.get(key)
    if not isinstance(value, str) or value not in values:
        raise _Bad(f"{what} needs {key} in {list(values)}")
    return value


def read_body(env: Envelope) -> Body | str:
    """The typed body of `env`'s payload, or the problem that makes the message MALFORMED."""
    what = env.message_type.value
    p = env.payload
    try:
        match env.message_type:
            case MessageType.FLOW_EVENT | MessageType.GATE_OPEN | MessageType.GATE_DECISION \
                    | MessageType.GATE_ACK | MessageType.TASK_RESPONSE if not isinstance(p, dict):
                raise _Bad(f"{what} payload is not an object")
            case MessageType.FLOW_EVENT:
                assert isinstance(p, dict)
                if not env.conversation_id:
                    raise _Bad("FLOW_EVENT needs a conversationId")
                text = p.get("text")
                if not isinstance(text, str):
                    raise _Bad("FLOW_EVENT needs text (a string)")
                return FlowEventBody(_text(p, "stream", what), _positive(p, "seq", what),
                                     FlowKind(_one_of(p, "kind", tuple(FlowKind), what)), text,
                                     _text(p, "lane", what))
            case MessageType.GATE_OPEN:
                assert isinstance(p, dict)
                return GateOpenBody(_text(p, "gateId", what), _text(p, "processInstId", what),
                                    _text(p, "activityId", what), _text(p, "agentId", what),
                                    str(p.get("prompt", "")), _positive(p, "timeoutMs", what),
                                    TimeoutPolicy(_one_of(p, "onTimeout", tuple(TimeoutPolicy),
                                                          what)))
            case MessageType.GATE_DECISION:
                assert isinstance(p, dict)
                return GateDecisionBody(_text(p, "gateId", what), _text(p, "processInstId", what),
                                        Decision(_one_of(p, "decision", tuple(Decision), what)))
            case MessageType.GATE_ACK:
                assert isinstance(p, dict)
                return GateAckBody(_text(p, "gateId", what),
                                   AckStatus(_one_of(p, "status", tuple(AckStatus), what)))
            case MessageType.TASK_RESPONSE:
                assert isinstance(p, dict)
                return TaskResponseBody(_one_of(p, "status", TASK_OUTCOMES, what), p)
            case _:
                return OpaqueBody(p)
    except _Bad as exc:
        return str(exc)


# built per message many times over: see bench.core.frozen
quick_init_module(globals())
