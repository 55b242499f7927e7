"""An A2A-over-MQTT responder written outside the bench, on paho-mqtt's MQTT 5 client, from
the profile's spec and the bench's agent contract (docs/profiles/own-agent.md) alone: it
imports nothing of the bench. The bench starts it as a node process:

    a2a-bench run a2a_restart --node-command "responder=python examples/a2a-responder/responder.py"

It keeps what the profile asks of a responder: a persistent session (clean start 0 and a
Session Expiry Interval), its retained card online after its SUBACK and offline by its will,
a durable Task.id table (a line per change, fsynced before the request is acknowledged), a
retry of a Task.id it has answered from that table and not run again, a JSON-RPC error for a
request it cannot serve, a request naming another context than its task's refused (-32602),
a task its agent ended with a question (`inputRequired`) continued by the next request for
it. Its agent is the bench's: it says `agent_called` and waits for the bench's
`task_finished` line. Bugs to show what the bench finds (`--bug NAME`, repeatable):
`memory-dedup` keeps the Task.id table in memory only (after a restart a retry runs its task
a second time); `clean-start` connects with clean start 1 and no session expiry (what the
broker queued while it was away is lost); `no-card` never publishes its card online;
`any-task-id` takes any string as a Task.id (the profile asks for a UUIDv4, A2M-RSP-4);
`stays-online` leaves without saying so (its card says online after it is gone, A2M-PRES-3);
`echoes-token` copies a request's User Properties, its bearer token among them, onto its
replies (A2M-RSP-6); `plain-tcp` connects to the broker's plain port though it was given
TLS (its requests' tokens then cross in the clear, A2M-SESS-6); `any-reply-topic` takes any
Response Topic it is given for a reply path, an empty one or one with a wildcard too (it runs
the task, and paho refuses the publish: A2M-RSP-2); `last-context-property` compares only the
last of a request's a2a-context-id User Properties with its payload (A2M-CTX-4). Where its
topology requires bearer tokens it checks them with PyJWT; where the bench offers TLS it
connects by it.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import sys
import threading
import time
import uuid

import jwt
import paho.mqtt.client as mqtt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
            "TASK_STATE_REJECTED"}
spec = json.loads(sys.stdin.readline())
node, a2a = spec["node"], spec["node"]["a2a"]
ME, AGENT, UNIT, ORG = node["node_id"], node["agents"][0], node["namespace"], a2a["org"]
OAUTH = a2a.get("oauth")          # bearer tokens required: the issuer, scope and public key
REQUEST = f"$a2a/v1/request/{ORG}/{UNIT}/{AGENT}"
CARD = f"$a2a/v1/discovery/{ORG}/{UNIT}/{AGENT}"
BUGS = {b for flag, b in zip(sys.argv, sys.argv[1:], strict=False) if flag == "--bug"}
IN_MEMORY = "memory-dedup" in BUGS
TABLE = os.path.join(spec["data_dir"], "tasks.jsonl")
out_lock = threading.Lock()
lock = threading.Lock()           # paho's thread takes requests, the main one the agent's lines
tasks: dict[str, dict] = {}       # Task.id -> {state, context, result, watchers: [[topic, corr]]}


def say(kind: str, **fields: object) -> None:
    """One line of the node-process protocol on stdout."""
    with out_lock:
        print(json.dumps({"node": ME, "kind": kind, "fields": fields,
                          "tMs": int((time.time() - spec["t0"]) * 1000)}), flush=True)


#: The ops of the bench's client-side faults (PROTOCOL.md §2.3), none of which this program
#: carries out: each is said as a harness_error, as the contract asks, so that the run
#: does not count a fault that never acted
FAULT_OPS = ("keys", "clock_skew", "second_connection", "client_id", "strip_reply_node",
             "publish_failure")


def keep(task_id: str) -> None:
    """The task's new state on disk before anything depends on it."""
    if IN_MEMORY:
        return
    with open(TABLE, "a") as fh:
        fh.write(json.dumps({"id": task_id, **tasks[task_id]}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def props(corr: bytes | None, card: str | None = None) -> Properties:
    p = Properties(PacketTypes.PUBLISH)
    if corr is not None:
        p.CorrelationData = corr
    if card is not None:
        p.UserProperty = [("a2a-status", card), ("a2a-status-source", "agent")]
    return p


def reply(topic: str, corr: bytes | None, body: dict, echo: list | None = None) -> None:
    p = props(corr)
    if echo and "echoes-token" in BUGS:              # the request's User Properties copied back
        p.UserProperty = echo
    client.publish(topic, json.dumps({"jsonrpc": "2.0", **body}), qos=1, properties=p)


def unauthorized(m: mqtt.MQTTMessage) -> str | None:
    """Where the launch spec says tokens are required (its `a2a.oauth`): why this request's
    bearer token does not let it be processed — PyJWT checks the EdDSA signature, `iss`,
    `aud` and `exp` (this process's clock), then the scope."""
    if OAUTH is None:
        return None
    value = dict(getattr(m.properties, "UserProperty", [])).get("a2a-authorization", "")
    if not value.startswith("Bearer "):
        return "no bearer token"
    try:
        claims = jwt.decode(value[7:], Ed25519PublicKey.from_public_bytes(
            bytes.fromhex(OAUTH["public_key"])), algorithms=["EdDSA"],
            audience=f"a2a://{ORG}/{UNIT}", issuer=OAUTH["issuer"],
            options={"require": ["exp", "iss", "aud"]})
    except jwt.InvalidTokenError as exc:
        return f"token refused: {type(exc).__name__}"
    return None if OAUTH["scope"] in str(claims.get("scope", "")).split() else "scope missing"


def answer(task_id: str, topic: str, corr: bytes | None, rpc_id: object) -> None:
    t = tasks[task_id]
    task = {"id": task_id, "contextId": t["context"], "status": {"state": t["state"]}}
    if t["result"] is not None:
        task["artifacts"] = [{"artifactId": f"{task_id}:result", "parts": [{"text": t["result"]}]}]
    reply(topic, corr, {"id": rpc_id, "result": {"task": task}},   # SendMessageResponse
          echo=t.get("asked_with"))


def on_message(c: mqtt.Client, _u: object, m: mqtt.MQTTMessage) -> None:
    with lock:
        take(c, m)


def invalid(m: mqtt.MQTTMessage) -> tuple[int, str] | dict:
    """The request, or the JSON-RPC error it gets (JSON-RPC 2.0; the profile's -32005)."""
    try:
        req = json.loads(m.payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return -32700, "parse error"
    if not isinstance(req, dict) or req.get("jsonrpc") != "2.0" \
            or not isinstance(req.get("id"), (str, int)) or isinstance(req["id"], bool) \
            or not isinstance(req.get("method"), str):
        return -32600, "invalid request"
    if req["method"] != "SendMessage":
        return -32601, "method not found"
    msg = req.get("params", {}).get("message") if isinstance(req.get("params"), dict) else None
    try:
        assert isinstance(msg, dict) and isinstance(msg["taskId"], str)
        assert "any-task-id" in BUGS or uuid.UUID(msg["taskId"]).version == 4
    except (AssertionError, KeyError, TypeError, ValueError):
        return -32602, "message.taskId must be a UUIDv4"
    # A2A's Message: a messageId, a role of its enum, parts that are Part objects, a
    # contextId that is a string if any
    if not isinstance(msg.get("messageId"), str) or not msg["messageId"] \
            or msg.get("role") not in ("ROLE_USER", "ROLE_AGENT") \
            or not isinstance(msg.get("parts"), list) \
            or not all(isinstance(p, dict) for p in msg["parts"]) \
            or not isinstance(msg.get("contextId", ""), (str, type(None))):
        return -32602, "message needs a messageId, a role, Part objects, a string contextId"
    given = [v for k, v in getattr(m.properties, "UserProperty", []) if k == "a2a-context-id"]
    if "last-context-property" in BUGS:               # a dict of the pairs: the last one only
        given = given[-1:]
    if any(v != msg.get("contextId") for v in given):  # a User Property may repeat
        return -32602, "a2a-context-id differs from message.contextId"
    if getattr(m.properties, "CorrelationData", None) is None:
        return -32005, "no Correlation Data"
    return req


def take(c: mqtt.Client, m: mqtt.MQTTMessage) -> None:
    topic = getattr(m.properties, "ResponseTopic", None)
    corr = getattr(m.properties, "CorrelationData", None)
    try:
        if topic is None or ("any-reply-topic" not in BUGS and (
                not topic or any(ch in topic for ch in "+#"))):
            return                                    # no reply path (none to publish to): dropped
        req = invalid(m)
        if isinstance(req, tuple):
            code, why = req
            reply(topic, corr, {"id": None, "error": {"code": code, "message": why}})
            return
        refused = unauthorized(m)
        if refused is not None:                       # before anything of it is processed
            reply(topic, corr, {"id": req["id"], "error": {"code": -32600, "message":
                                                           f"unauthorized: {refused}"}},
                  echo=getattr(m.properties, "UserProperty", None))
            return
        rpc_id, msg = req["id"], req["params"]["message"]
        task_id, context = msg["taskId"], msg.get("contextId")
        t = tasks.get(task_id)
        if t is not None and None not in (context, t["context"]) and context != t["context"]:
            reply(topic, corr, {"id": rpc_id, "error": {"code": -32602, "message":
                                                        "contextId is not the task's"}})
            return
        if t is not None and t["state"] == "TASK_STATE_INPUT_REQUIRED" and [topic, corr.hex()] \
                not in [w[:2] for w in t["watchers"]]:  # its next turn (not a redelivery)
            t.update(state="TASK_STATE_WORKING", turn=t.get("turn", 1) + 1,
                     watchers=[[topic, corr.hex(), rpc_id]])
            keep(task_id)
            say("agent_called", taskId=task_id, agentId=AGENT, conversationId=context,
                turn=t["turn"])
            return
        if t is not None:                             # a retry: its state, nothing runs again
            if t["state"] not in TERMINAL and [topic, corr.hex()] not in \
                    [w[:2] for w in t["watchers"]]:   # a redelivered copy: no second watcher
                t["watchers"].append([topic, corr.hex(), rpc_id])
                keep(task_id)
            answer(task_id, topic, corr, rpc_id)
            return
        tasks[task_id] = {"state": "TASK_STATE_WORKING", "context": context, "result": None,
                          "watchers": [[topic, corr.hex(), rpc_id]]}
        if "echoes-token" in BUGS:                    # kept to answer with (the bug)
            tasks[task_id]["asked_with"] = getattr(m.properties, "UserProperty", None)
        keep(task_id)
        say("task_executed", taskId=task_id, agentId=AGENT, conversationId=context,
            messageId=corr.hex())
        say("agent_called", taskId=task_id, agentId=AGENT, conversationId=context)
    finally:
        c.ack(m.mid, m.qos)                           # only once the table is on disk


def finished(op: dict) -> None:
    t = tasks.get(op["task_id"])
    if t is None or t["state"] in TERMINAL:
        return
    asks = op["ok"] and isinstance(op["result"], dict) and "inputRequired" in op["result"]
    t["state"] = "TASK_STATE_INPUT_REQUIRED" if asks else "TASK_STATE_COMPLETED" if op["ok"] \
        else "TASK_STATE_FAILED"
    t["result"] = json.dumps(op["result"]) if op["ok"] and not asks else None
    keep(op["task_id"])
    for topic, corr, rpc_id in t["watchers"]:
        answer(op["task_id"], topic, bytes.fromhex(corr), rpc_id)


def on_subscribe(c: mqtt.Client, _u: object, _mid: int, _codes: object, _p: object) -> None:
    if "no-card" not in BUGS:
        c.publish(CARD, json.dumps({"name": AGENT}), qos=1, retain=True,
                  properties=props(None, "online"))
    say("executors_registered", registered=1, expected=1, agents=[AGENT], subscribed=[REQUEST])


os.makedirs(spec["data_dir"], exist_ok=True)
if not IN_MEMORY and os.path.exists(TABLE):          # what the last process kept
    with open(TABLE) as fh:
        for line in fh:
            row = json.loads(line)
            tasks[row.pop("id")] = row
for task_id, t in tasks.items():                     # its work died with that process
    if t["state"] not in TERMINAL:
        t["state"] = "TASK_STATE_FAILED"
        keep(task_id)
client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=node["client_id"] or ME,
                     protocol=mqtt.MQTTv5, manual_ack=True)
will = Properties(PacketTypes.WILLMESSAGE)
will.UserProperty = [("a2a-status", "offline"), ("a2a-status-source", "lwt")]
client.will_set(CARD, json.dumps({"name": AGENT}), qos=1, retain=True, properties=will)
client.on_message = on_message
client.on_subscribe = on_subscribe
client.on_connect = lambda c, _u, _f, _rc, _p: c.subscribe(REQUEST, qos=1)
expiry = Properties(PacketTypes.CONNECT)
expiry.SessionExpiryInterval = 0 if "clean-start" in BUGS else 600
host, port = spec["broker"]
tls = spec.get("tls")             # TLS offered: the CA to verify the broker by, and its port
if tls and "plain-tcp" not in BUGS:
    client.tls_set_context(ssl.create_default_context(cafile=tls.get("ca_file"),
                                                      cadata=tls.get("ca_pem")))
    port = tls.get("port") or port
client.connect(host, port, keepalive=5, clean_start="clean-start" in BUGS, properties=expiry)
for task_id, t in tasks.items():                     # the interrupted ones told, once connected
    if t["state"] == "TASK_STATE_FAILED" and t["watchers"]:
        for topic, corr, rpc_id in t["watchers"]:
            answer(task_id, topic, bytes.fromhex(corr), rpc_id)
        t["watchers"] = []
        keep(task_id)
client.loop_start()


class Leave(Exception):
    """SIGTERM: stop as the stop line asks (an operator, `docker stop`, a graceful restart)."""


def on_sigterm(signum: int, frame: object) -> None:
    raise Leave


signal.signal(signal.SIGTERM, on_sigterm)
try:
    for raw in sys.stdin:                            # the bench's lines: its agent, and stop
        op = json.loads(raw)
        if op.get("op") == "stop":
            break
        if op.get("op") in FAULT_OPS:
            say("harness_error", error=f"cannot carry out {op['op']}", op=op["op"])
        if op.get("op") == "task_finished":
            with lock:
                finished(op)
except Leave:
    pass
if "stays-online" not in BUGS:                       # leaving on purpose: no will will say so
    client.publish(CARD, json.dumps({"name": AGENT}), qos=1, retain=True,
                   properties=props(None, "offline")).wait_for_publish(5)
client.disconnect()
client.loop_stop()
