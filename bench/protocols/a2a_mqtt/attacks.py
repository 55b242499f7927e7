"""Requests an A2A-over-MQTT responder must refuse (the malformed_request fault): the hostile
cases of issue 32 — malformed JSON, non-UTF-8 bytes, a JSON array or null, a request
without jsonrpc, an unknown method, a missing or non-UUID Task.id, a context id that
differs between its User Property and the payload, a task's next request in another context
than the one it was created in, an empty payload, and the binding's own: no Response Topic,
no Correlation Data; and one valid request whose Correlation Data is binary, not UTF-8.
Derived from tables rather than written one by one: each field a responder reads given each
JSON type it may not have (TYPED_FIELDS) and each value of its type the rules forbid
(MALFORMED_VALUES); each MQTT 5 property it reads in the forms the profile forbids or lets
vary (PROPERTY_FORMS).
Built here from the spec, never with an agent's code (the answer each must get is the
judge's to know: `bench.protocols.a2a_mqtt.rules.replies.MALFORMED_ANSWER`). No I/O."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bench.core.auth import SignatureVerdict
from bench.core.config import OAuth
from bench.core.events import AttackSent
from bench.core.properties import Props

#: the cases, in the order the fault sends them
CASES = ("not_json", "not_utf8", "array", "null", "no_jsonrpc", "unknown_method",
         "bad_task_id", "no_task_id", "context_mismatch", "no_correlation",
         "no_response_topic", "context_switch", "empty", "binary_correlation")
#: the bearer-token cases, for a responder that requires tokens (A2M-RSP-7): a request
#: valid in every other way whose token is missing, not a Bearer one, not a JWT, expired,
#: for another unit, from another issuer, signed by another key, or short of the scope
TOKEN_CASES = ("no_token", "not_bearer", "not_a_jwt", "expired_token", "wrong_audience",
               "wrong_issuer", "forged_token", "missing_scope")
#: A wrong JSON value of each type (a case sends one where its field wants another type)
WRONG_VALUES: dict[str, object] = {"null": None, "boolean": True, "number": 7, "string": "x",
                                   "array": ["x"], "object": {"x": 1}}
#: Each field of a request a responder reads, and the JSON types A2A v1.0's JSON-RPC binding
#: lets it be (JSON-RPC 2.0 §4: an id is a string or a number — null only discouraged, and
#: never sent here; A2A's Message: messageId and role strings, parts an array, contextId
#: optional; SendMessage's params an object holding the message; GetTask's and
#: CancelTask's params.id a string). Every other type is invalid input (A2M-RSP-3).
TYPED_FIELDS: dict[str, tuple[str, ...]] = {
    "jsonrpc": ("string",), "id": ("string", "number", "null"), "method": ("string",),
    "params": ("object",), "params.message": ("object",),
    "params.message.messageId": ("string",), "params.message.role": ("string",),
    "params.message.parts": ("array",), "params.message.contextId": ("string", "null"),
    "params.message.taskId": ("string",),
    "GetTask.params.id": ("string",), "CancelTask.params.id": ("string",),
}
#: the wrong-type cases, derived from TYPED_FIELDS: `type:<field>:<the type sent>`
TYPE_CASES = tuple(f"type:{field}:{t}" for field, ok in TYPED_FIELDS.items()
                   for t in WRONG_VALUES if t not in ok)
#: Each field of TYPED_FIELDS, given a value of its own type that the rules forbid under any
#: reading (JSON-RPC 2.0 §4: jsonrpc exactly "2.0", a method the server has; A2A's Message:
#: a messageId, a role of its enum ROLE_USER / ROLE_AGENT, parts that are Part objects;
#: A2M-RSP-4: a Task.id that is a UUIDv4 — a UUID of another version is none; GetTask's and
#: CancelTask's params.id naming a task). `id` (any string or number) and contextId (an
#: empty one is ProtoJSON's absent one: a new context) have none.
MALFORMED_VALUES: dict[str, dict[str, object]] = {
    "jsonrpc": {"1.0": "1.0"}, "method": {"empty": ""},
    "params.message.messageId": {"empty": ""},
    "params.message.role": {"not_a_role": "ROLE_ROBOT"},
    "params.message.parts": {"not_parts": [7, "hi"]},
    "params.message.taskId": {"empty": "", "uuid1": "6f1d2c2e-2a3b-11ef-8b5c-0242ac120002"},
    "GetTask.params.id": {"empty": ""}, "CancelTask.params.id": {"empty": ""},
}
#: the malformed-value cases, derived from MALFORMED_VALUES: `value:<field>:<name>`
VALUE_CASES = tuple(f"value:{field}:{name}" for field, values in MALFORMED_VALUES.items()
                    for name in values)
#: Each MQTT 5 property of a request a responder reads, and the forms of it the profile
#: forbids or lets vary — MQTT 5 fixes every property's type on the wire (a Response Topic
#: is a UTF-8 string, Correlation Data binary, a User Property a pair of strings), so what
#: can be wrong is the form. The absent forms and binary Correlation Data are CASES
#: (no_response_topic, no_correlation, binary_correlation), a context property that differs
#: from the payload too (context_mismatch). Here: a Response Topic that is no topic to
#: publish to, empty ([MQTT-4.7.3-1]) or with a wildcard ([MQTT-3.3.2-14]) — no reply
#: path, so not executed (A2M-RSP-2); an a2a-context-id empty, or given twice with
#: different values (a User Property may repeat, [MQTT-3.3.2-18]), one of them the
#: payload's — binding metadata invalid (A2M-CTX-4); a payload that is no UTF-8 although
#: its Payload Format Indicator says it is — a parse error (A2M-RSP-3); and two a valid
#: request may carry, which change nothing: an a2a- User Property the profile does not
#: define (ignored, Error Handling and Deduplication 3: A2M-PROP-2) and an a2a-artifact-mode
#: no responder supports (answered in JSON, A2M-BIN-1).
PROPERTY_FORMS: dict[str, tuple[str, ...]] = {
    "response_topic": ("empty", "wildcard"),
    "a2a-context-id": ("empty", "twice"),
    "payload_format": ("not_utf8",),
    "a2a-unknown": ("present",),
    "a2a-artifact-mode": ("unknown",),
}
#: the property cases, derived from PROPERTY_FORMS: `prop:<property>:<form>`
PROP_CASES = tuple(f"prop:{prop}:{form}" for prop, forms in PROPERTY_FORMS.items()
                   for form in forms)
#: context_switch is sent after its opening: a valid request (it runs) creating the task
#: the switch then names in another context (A2M-CTX-3)
OPENING = "context_opening"
#: the attack's name in the history (attack_sent.attack)
ATTACK = "malformed_request"


@dataclass(frozen=True, slots=True)
class Malformed:
    topic: str
    payload: bytes
    props: Props
    event: AttackSent


def _send(task_id: str | None, context: str | None = "ctx-hostile",
          method: str = "SendMessage") -> dict[str, object]:
    message: dict[str, object] = {"messageId": "m-hostile", "role": "ROLE_USER",
                                  "parts": [{"text": "hostile"}], "contextId": context}
    if task_id is not None:
        message["taskId"] = task_id
    return {"jsonrpc": "2.0", "id": "hostile", "method": method, "params": {"message": message}}


def _typed(case: str, task_id: str, value: object = None) -> bytes:
    """A valid request with one field of the wrong JSON type, as `type:<field>:<type>`
    says, or of a forbidden value, as `value:<field>:<name>` does (`value`, where given, in
    place of the table's: a case's own Task.id); a GetTask or CancelTask one where the
    field is named after its method."""
    family, field, kind = case.split(":")
    method, _, path = field.partition(".") if field.startswith(("GetTask.", "CancelTask.")) \
        else ("SendMessage", "", field)
    body: dict[str, object] = _send(task_id) if method == "SendMessage" else \
        {"jsonrpc": "2.0", "id": "hostile", "method": method, "params": {"id": task_id}}
    *parents, last = path.split(".")
    holder = body
    for key in parents:
        holder = holder[key]   # type: ignore[assignment]
    holder[last] = WRONG_VALUES[kind] if family == "type" else \
        value if value is not None else MALFORMED_VALUES[field][kind]
    return json.dumps(body).encode()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def bearer(oauth: OAuth, audience: str, now_ms: float, case: str = "") -> str | None:
    """An `a2a-authorization` value for a request to `audience` (a unit), good or spoilt as
    `case` says — a JWS built here from RFC 7519/8037 with Ed25519 directly (never the
    requester's minting code, nor the library the responder checks it with)."""
    if case == "no_token":
        return None
    if case == "not_bearer":
        return "Basic YTJhLWJlbmNoOnNlY3JldA=="
    if case == "not_a_jwt":
        return "Bearer not-a-jwt"
    assert oauth.signing_seed is not None
    iat = int(now_ms // 1000)
    claims = {"iss": "https://evil.invalid" if case == "wrong_issuer" else oauth.issuer,
              "aud": audience + "-other" if case == "wrong_audience" else audience,
              "sub": "nemesis", "scope": "a2a:read" if case == "missing_scope" else oauth.scope,
              "iat": iat - 600 if case == "expired_token" else iat,
              "exp": iat - 300 if case == "expired_token" else iat + 300}
    seed = hashlib.sha256(oauth.signing_seed).digest() if case == "forged_token" \
        else oauth.signing_seed
    signing = _b64(json.dumps({"alg": "EdDSA", "typ": "JWT"}).encode()) + "." + \
        _b64(json.dumps(claims).encode())
    signature = Ed25519PrivateKey.from_private_bytes(seed).sign(signing.encode())
    return f"Bearer {signing}.{_b64(signature)}"


def malformed_request(case: str, n: int, fault_index: int, *, org: str, unit: str,
                      agent: str, target_node: str, oauth: OAuth | None = None,
                      now_ms: float = 0.0) -> Malformed:
    """The `n`th hostile request of fault `fault_index`, of kind `case`, to `agent`. Its
    Response Topic is its own (`$a2a/v1/reply/{org}/{unit}/nemesis/{token}`: nobody
    subscribes there), so an answer to it is found by its topic; `token` is its
    message id in the history. Where responders require bearer tokens (`oauth`), every
    case carries a good one but the token cases, whose token is the hostile part."""
    token = f"hostile-{fault_index}-{n}"
    task_id = f"00000000-0000-4000-8{fault_index % 1000:03d}-{n:012d}"   # a UUIDv4 of its own
    # not a UUID, and its own too: a responder that runs it runs this case's task only
    bad_id = f"not-a-uuid-{fault_index}-{n}"
    # a UUID of version 1, its own likewise (the table's, with this case's digits)
    uuid1 = str(MALFORMED_VALUES["params.message.taskId"]["uuid1"])[:20] + \
        f"{fault_index % 1000:03d}-{n:012d}" if case == "value:params.message.taskId:uuid1" \
        else None
    bodies: dict[str, bytes] = {
        "not_json": b'{"jsonrpc": "2.0", "id": ',
        "not_utf8": b'{"jsonrpc":"2.0","id":"\xff\xfe"}',
        "array": b'[{"jsonrpc": "2.0"}]',
        "null": b"null",
        "no_jsonrpc": json.dumps({k: v for k, v in _send(task_id).items()
                                  if k != "jsonrpc"}).encode(),
        "unknown_method": json.dumps(_send(task_id, method="DeleteEverything")).encode(),
        "bad_task_id": json.dumps(_send(bad_id)).encode(),
        "no_task_id": json.dumps(_send(None)).encode(),
        "context_mismatch": json.dumps(_send(task_id, context="ctx-payload")).encode(),
        "no_correlation": json.dumps(_send(task_id)).encode(),
        "no_response_topic": json.dumps(_send(task_id)).encode(),
        "empty": b"",
        # not malformed at all: MQTT 5 Correlation Data is binary, and these bytes are no
        # UTF-8 — a valid request, to be answered with them echoed (A2M-RR-3)
        "binary_correlation": json.dumps(_send(task_id)).encode(),
        OPENING: json.dumps(_send(task_id, context="ctx-first")).encode(),
        "context_switch": json.dumps(_send(task_id, context="ctx-second")).encode(),
        **{c: json.dumps(_send(task_id)).encode() for c in TOKEN_CASES},
        **({case: _typed(case, task_id, uuid1)} if case in TYPE_CASES + VALUE_CASES else {}),
        **{c: json.dumps(_send(task_id)).encode() for c in PROP_CASES},
        "prop:payload_format:not_utf8": b'{"jsonrpc":"2.0","id":"\xff\xfe"}',
    }
    if case == OPENING:
        token += "-open"
    reply = {"prop:response_topic:empty": "",
             "prop:response_topic:wildcard": f"$a2a/v1/reply/{org}/{unit}/+/{token}"}.get(
        case, f"$a2a/v1/reply/{org}/{unit}/nemesis/{token}")
    correlation = None if case == "no_correlation" else \
        b"\xff\xfe" + token.encode() if case == "binary_correlation" else token.encode()
    users: tuple[tuple[str, str], ...] = {
        "context_mismatch": (("a2a-context-id", "ctx-property"),),
        "prop:a2a-context-id:empty": (("a2a-context-id", ""),),
        # the payload's value last: a responder that reads only the last one is satisfied
        "prop:a2a-context-id:twice": (("a2a-context-id", "ctx-property"),
                                      ("a2a-context-id", "ctx-hostile")),
        "prop:a2a-unknown:present": (("a2a-bench-unknown", "ignore me"),),
        "prop:a2a-artifact-mode:unknown": (("a2a-artifact-mode", "hologram"),),
    }.get(case, ())
    if oauth is not None:
        value = bearer(oauth, f"a2a://{org}/{unit}", now_ms,
                       case if case in TOKEN_CASES else "")
        if value is not None:
            users = (*users, ("a2a-authorization", value))
    props = Props(response_topic=None if case == "no_response_topic" else reply,
                  correlation_data=correlation, user_properties=users,
                  content_type="application/json",
                  payload_format=1 if case == "prop:payload_format:not_utf8" else None)
    named = bad_id if case == "bad_task_id" else uuid1 or \
        ("" if case == "value:params.message.taskId:empty" else task_id)  # its payload's Task.id
    event = AttackSent(ATTACK, case, fault_index, token, named, target_node, agent, "",
                       None, SignatureVerdict.UNSIGNED)
    return Malformed(f"$a2a/v1/request/{org}/{unit}/{agent}", bodies[case], props, event)
