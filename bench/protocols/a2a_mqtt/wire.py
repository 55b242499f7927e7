"""What travels on the wire under the A2A-over-MQTT profile: the MQTT 5 properties it reads
(`Props`, the core's), its User Property names, the topic scheme (`Topics`), and the
A2A v1.0 JSON-RPC bodies — parsed into a `Call` or refused with the JSON-RPC error the
profile prescribes (`Refusal`), and built for replies and stream items.

No I/O, no clock, no randomness: ids come from the caller.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bench.core.properties import Props as Props

PREFIX = "$a2a/v1"
IDENTIFIER = re.compile(r"^[A-Za-z0-9_.-]+$")                        # A2M-ID-1
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")

#: User Properties the profile defines (A2M-PROP-1: all `a2a-`)
STATUS, STATUS_SOURCE = "a2a-status", "a2a-status-source"
RESPONDER_AGENT_ID = "a2a-responder-agent-id"
AUTHORIZATION = "a2a-authorization"
CONTEXT_ID = "a2a-context-id"

Json = Any


class BadIdentifier(ValueError):
    """An org, unit, agent or pool id outside A2M-ID-1's alphabet: configuration, not input."""


@dataclass(frozen=True, slots=True)
class Topics:
    """Every topic of one agent's unit (A2M-TOPIC-1..3), validated once."""

    org_id: str
    unit_id: str

    def __post_init__(self) -> None:
        for name in ("org_id", "unit_id"):
            check_identifier(name, getattr(self, name))

    def _under(self, method: str, agent_id: str) -> str:
        check_identifier("agent_id", agent_id)
        return f"{PREFIX}/{method}/{self.org_id}/{self.unit_id}/{agent_id}"

    def discovery(self, agent_id: str) -> str:
        return self._under("discovery", agent_id)

    def discovery_filter(self) -> str:
        return f"{PREFIX}/discovery/{self.org_id}/{self.unit_id}/+"

    def request(self, agent_id: str) -> str:
        return self._under("request", agent_id)

    def reply(self, agent_id: str, suffix: str) -> str:
        check_identifier("reply_suffix", suffix)
        return f"{self._under('reply', agent_id)}/{suffix}"

    def pool(self, pool_id: str) -> str:
        check_identifier("pool_id", pool_id)
        return f"{PREFIX}/request/{self.org_id}/{self.unit_id}/pool/{pool_id}"

    def pool_group(self, pool_id: str) -> str:
        """The shared group every member of the pool uses (A2M-POOL-1: deterministic)."""
        return f"a2a.{self.org_id}.{self.unit_id}.{pool_id}"

    def shared_pool(self, pool_id: str) -> str:
        return f"$share/{self.pool_group(pool_id)}/{self.pool(pool_id)}"

    def client_id(self, agent_id: str) -> str:
        """A2M-SESS-3."""
        check_identifier("agent_id", agent_id)
        return f"{self.org_id}/{self.unit_id}/{agent_id}"


def check_identifier(name: str, value: str) -> None:
    if not IDENTIFIER.match(value):
        raise BadIdentifier(f"{name}={value!r} must match {IDENTIFIER.pattern} (A2M-ID-1)")


# -- A2A task states and JSON-RPC ------------------------------------------------------------------
class TaskState(StrEnum):
    """A2A v1.0 task states, by their wire names."""

    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    REJECTED = "TASK_STATE_REJECTED"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"


#: A2M-STREAM-2: these end a correlation's stream and the task
TERMINAL = frozenset({TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED,
                      TaskState.REJECTED})
#: A2M-STREAM-3: these end a correlation's stream, not the task
INTERRUPTED = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})


class Method(StrEnum):
    SEND = "SendMessage"
    SEND_STREAMING = "SendStreamingMessage"
    GET_TASK = "GetTask"
    CANCEL_TASK = "CancelTask"


class ErrorCode:
    """JSON-RPC 2.0 and A2A error codes, with the profile's binding errors (A2M-ERR-2)."""

    PARSE = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    TASK_NOT_FOUND = -32001
    TASK_NOT_CANCELABLE = -32002
    REQUEST_EXPIRED = -32003
    RESPONDER_UNAVAILABLE = -32004
    TRANSPORT_PROTOCOL_ERROR = -32005
    #: A2A v1.0 names no JSON-RPC code for a failed authentication (over HTTP it is a 401):
    #: the reference answers a request whose bearer token it refuses as an invalid request
    UNAUTHORIZED = INVALID_REQUEST


#: A2M-ERR-2: the binding's errors name themselves in error.data.a2a_error, exactly so
BINDING_ERRORS = {ErrorCode.REQUEST_EXPIRED: "request_expired",
                  ErrorCode.RESPONDER_UNAVAILABLE: "responder_unavailable",
                  ErrorCode.TRANSPORT_PROTOCOL_ERROR: "transport_protocol_error"}


@dataclass(frozen=True, slots=True)
class Call:
    """One well-formed JSON-RPC request of the profile. For SendMessage and
    SendStreamingMessage `task_id` is Message.task_id (a UUIDv4) and `text` the message's
    text parts joined; for GetTask and CancelTask `task_id` is params.id."""

    rpc_id: Json
    method: Method
    task_id: str
    context_id: str | None = None
    text: str = ""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request cannot be served, as the JSON-RPC error its reply carries."""

    rpc_id: Json
    code: int
    message: str


#: A2A v1.0's Role, as its JSON carries it (ROLE_UNSPECIFIED is no role a message has)
ROLES = ("ROLE_USER", "ROLE_AGENT")


def parse_call(payload: bytes, props: Props) -> Call | Refusal:
    """A request's payload read as the profile's JSON-RPC, or the error to answer with.
    Checks, in order: UTF-8 and JSON (-32700); a JSON-RPC 2.0 request object (-32600); a
    method of the profile (-32601); params (-32602: an object; the message's messageId,
    role and parts of their types; Task.id a UUIDv4, A2M-RSP-4); -32005 for a User
    Property a2a-context-id that differs from the payload's (binding metadata invalid,
    A2M-CTX-4)."""
    try:
        raw: object = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return Refusal(None, ErrorCode.PARSE, f"parse error: {str(exc)[:120]}")
    if not isinstance(raw, dict):
        return Refusal(None, ErrorCode.INVALID_REQUEST,
                       f"a JSON-RPC request is an object, not {type(raw).__name__}")
    rpc_id = raw.get("id")
    if not isinstance(rpc_id, str | int) or isinstance(rpc_id, bool):
        rpc_id = None
    if raw.get("jsonrpc") != "2.0" or rpc_id is None or not isinstance(raw.get("method"), str):
        return Refusal(rpc_id, ErrorCode.INVALID_REQUEST,
                       "a JSON-RPC 2.0 request needs jsonrpc '2.0', an id and a method")
    try:
        method = Method(raw["method"])
    except ValueError:
        return Refusal(rpc_id, ErrorCode.METHOD_NOT_FOUND, f"no method {raw['method']!r}"[:160])
    params = raw.get("params")
    if not isinstance(params, dict):
        return Refusal(rpc_id, ErrorCode.INVALID_PARAMS, "params must be an object")
    if method in (Method.GET_TASK, Method.CANCEL_TASK):
        task_id = params.get("id")
        if not isinstance(task_id, str) or not task_id:
            return Refusal(rpc_id, ErrorCode.INVALID_PARAMS, "params.id must name a task")
        return Call(rpc_id, method, task_id)
    message = params.get("message")
    if not isinstance(message, dict):
        return Refusal(rpc_id, ErrorCode.INVALID_PARAMS, "params.message must be an object")
    # A2A's Message: messageId and role strings, parts an array of Part objects — a field of
    # another JSON type is invalid input (A2M-RSP-3; it ran such a request until the
    # a2a_bad_types scenario sent each field every wrong type)
    for key in ("messageId", "role"):
        if not isinstance(message.get(key), str) or not message[key]:
            return Refusal(rpc_id, ErrorCode.INVALID_PARAMS,
                           f"message.{key} must be a non-empty string")
    # and a role of A2A v1.0's enum (it ran a message whose role was ROLE_ROBOT until the
    # a2a_bad_values scenario sent one)
    if message["role"] not in ROLES:
        return Refusal(rpc_id, ErrorCode.INVALID_PARAMS,
                       f"message.role must be one of {', '.join(ROLES)}, not "
                       f"{str(message['role'])[:40]!r}")
    parts = message.get("parts")
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        return Refusal(rpc_id, ErrorCode.INVALID_PARAMS,
                       "message.parts must be an array of Part objects")
    task_id = message.get("taskId")
    if not isinstance(task_id, str) or not UUID4.match(task_id):
        return Refusal(rpc_id, ErrorCode.INVALID_PARAMS,
                       f"message.taskId must be a UUIDv4, not {str(task_id)[:60]!r} (A2M-RSP-4)")
    context_id = message.get("contextId")
    if context_id is not None and (not isinstance(context_id, str) or not context_id):
        return Refusal(rpc_id, ErrorCode.INVALID_PARAMS,
                       "message.contextId must be a non-empty string when present")
    # every value: a User Property may repeat ([MQTT-3.3.2-18]), and one that differs is
    # invalid metadata even where another matches (it ran such a request, reading the last
    # value only, until the a2a_bad_properties scenario sent two)
    if any(k == CONTEXT_ID and v != context_id for k, v in props.user_properties):
        return Refusal(rpc_id, ErrorCode.TRANSPORT_PROTOCOL_ERROR,
                       "User Property a2a-context-id differs from message.contextId: binding "
                       "metadata invalid (A2M-CTX-4, A2M-ERR-2)")
    texts = [p["text"] for p in parts if isinstance(p.get("text"), str)]
    return Call(rpc_id, method, task_id, context_id, "".join(texts))


def error_body(rpc_id: Json, code: int, message: str) -> bytes:
    """A JSON-RPC error reply (A2M-ERR-1; the binding's codes with data.a2a_error, A2M-ERR-2)."""
    error: dict[str, Json] = {"code": code, "message": message}
    if code in BINDING_ERRORS:
        error["data"] = {"a2a_error": BINDING_ERRORS[code]}
    return _dump({"jsonrpc": "2.0", "id": rpc_id, "error": error})


def task_object(task_id: str, context_id: str | None, state: TaskState,
                result: str | None) -> dict[str, Json]:
    """An A2A Task, with the result as its one artifact once there is one."""
    task: dict[str, Json] = {"id": task_id, "contextId": context_id, "status": {"state": state}}
    if result is not None:
        task["artifacts"] = [{"artifactId": f"{task_id}:result", "parts": [{"text": result}]}]
    return task


def result_body(rpc_id: Json, result: dict[str, Json]) -> bytes:
    return _dump({"jsonrpc": "2.0", "id": rpc_id, "result": result})


def status_item(rpc_id: Json, task_id: str, context_id: str | None, state: TaskState) -> bytes:
    """A stream item: TaskStatusUpdateEvent (A2M-STREAM-1)."""
    return result_body(rpc_id, {"statusUpdate": {"taskId": task_id, "contextId": context_id,
                                                 "status": {"state": state}}})


def artifact_item(rpc_id: Json, task_id: str, context_id: str | None, seq: int,
                  text: str) -> bytes:
    """A stream item: TaskArtifactUpdateEvent, chunk `seq` of the task's one artifact."""
    return result_body(rpc_id, {"artifactUpdate": {
        "taskId": task_id, "contextId": context_id, "append": seq > 0,
        "artifact": {"artifactId": f"{task_id}:result", "parts": [{"text": text}],
                     "metadata": {"seq": seq}}}})


def _dump(obj: dict[str, Json]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()
