"""An A2A-over-MQTT requester written outside the bench, on paho-mqtt's MQTT 5 client, from
the profile's spec and the bench's requester contract (docs/profiles/own-agent.md) alone: it
imports nothing of the bench. The bench starts it as a node process and tells it, line by
line, what to ask; it prints what it asked and how each request ended:

    a2a-bench run a2a_restart --node-command "requester=python examples/a2a-requester/requester.py"

It keeps what the profile asks of a requester: a persistent session, its reply topic (its
suffix a fresh UUID's hex: A2M-SESS-4) subscribed before anything is published, a pooled
task's follow-ups and retries sent to the member a reply named (A2M-REQ-4, A2M-RETRY-8),
Response Topic and Correlation Data on every request, a UUIDv4 Task.id of its own making
(the same for every attempt, GetTask, CancelTask and next turn), the retry profile (first
reply within 15 s, three attempts, backoff 1 s and 2 s ±20 %, new Correlation Data each
time, none once a reply came). It keeps nothing on
disk: a restart forgets what was in flight. Bugs to show what the bench finds (`--bug
NAME`): `same-correlation` retries under the first attempt's Correlation Data (A2M-RETRY-2);
`fixed-task-id` names every task with one Task.id that is not a UUID (A2M-RR-5);
`stale-backoff` sends a retry whose backoff began before a reply came (A2M-RETRY-6: written
here by accident first, and caught by `a2a_requests`); `hasty-retry` gives up on a first
reply after 3 s, not 15 (A2M-RETRY-1, A2M-RETRY-5: judged off its wire);
`guessable-reply-topic` ends its reply topic in its node id (A2M-SESS-4);
`settles-by-task-id` takes a reply it cannot correlate for the request of the task it
names (A2M-REQ-2); `trusts-unnamed-pool-replies` takes a reply to a pooled request that
names no responder (A2M-REQ-3); `waits-out-the-stream` ends an operation only on a Task
result, not on a status update that ends the stream (A2M-STREAM-2, A2M-STREAM-3);
`republishes-stalled-streams` sends the request again when a stream stalls, not GetTask
(A2M-RETRY-7); `retries-protocol-errors` sends a request refused -32005 again (A2M-ERR-3).
A stream that brings nothing for 30 s (the profile's stream idle wait) ends its operation
NO_RESPONSE, and a GetTask on its Task.id asks where the task stands (A2M-RETRY-7).
"""

from __future__ import annotations

import json
import random
import signal
import sys
import threading
import time
import uuid

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

FINAL = {"TASK_STATE_COMPLETED": "COMPLETED", "TASK_STATE_FAILED": "FAILED",
         "TASK_STATE_CANCELED": "CANCELLED", "TASK_STATE_REJECTED": "FAILED",
         "TASK_STATE_INPUT_REQUIRED": "COMPLETED", "TASK_STATE_AUTH_REQUIRED": "FAILED"}
BUGS = {b for flag, b in zip(sys.argv, sys.argv[1:], strict=False) if flag == "--bug"}
FIRST_REPLY_S, ATTEMPTS, BACKOFF_S = 3.0 if "hasty-retry" in BUGS else 15.0, 3, (1.0, 2.0)
STREAM_IDLE_S = 30.0
spec = json.loads(sys.stdin.readline())
node, a2a = spec["node"], spec["node"]["a2a"]
ME, AGENT, UNIT, ORG = node["node_id"], node["agents"][0], node["namespace"], a2a["org"]
REPLY = f"$a2a/v1/reply/{ORG}/{UNIT}/{AGENT}/" + \
    (ME if "guessable-reply-topic" in BUGS else uuid.uuid4().hex)
out_lock = threading.Lock()
lock = threading.Lock()         # paho's thread takes replies, the main one the bench's lines
ops: dict[str, dict] = {}       # request id -> {task, corr: [hex], answered, settled, ...}
by_corr: dict[str, str] = {}    # Correlation Data (hex) -> request id
task_of: dict[str, str] = {}    # request id -> its Task.id (a follow-up names its request)
member_of: dict[str, str] = {}  # Task.id -> the agent a reply named for it (a pool's member)
subscribed = threading.Event()


def say(kind: str, **fields: object) -> None:
    with out_lock:
        print(json.dumps({"node": ME, "kind": kind, "fields": fields,
                          "tMs": int((time.time() - spec["t0"]) * 1000)}), flush=True)


#: The ops of the bench's client-side faults (PROTOCOL.md §2.3), none of which this program
#: carries out: each is said as a harness_error, as the contract asks, so that the run
#: does not count a fault that never acted
FAULT_OPS = ("keys", "clock_skew", "second_connection", "client_id", "strip_reply_node",
             "publish_failure")


def now_ms() -> int:
    return int((time.time() - spec["t0"]) * 1000)


def ask(req: dict) -> None:
    """A request line of the bench: SendMessage (or what its payload's `method` says) to
    the agent or `pool:{id}` it names."""
    payload = req.get("payload") or {}
    method = payload.get("method", "SendMessage")
    of = payload.get("ofRequest")
    task = task_of.get(of) if of else None
    task = task or ("not-a-uuid" if "fixed-task-id" in BUGS else str(uuid.uuid4()))
    task_of[req["request_id"]] = task
    to = req["to_agent_id"]
    if task in member_of:                              # its follow-ups go there (A2M-REQ-4)
        to = member_of[task]
    topic = f"$a2a/v1/request/{ORG}/{UNIT}/" + (f"pool/{to[5:]}" if to.startswith("pool:")
                                                 else to)
    context = str(uuid.uuid5(uuid.NAMESPACE_URL, req["conversation_id"])) \
        if req.get("conversation_id") else None
    ops[req["request_id"]] = {"task": task, "method": method, "topic": topic, "corr": [],
                              "context": context, "text": payload.get("ask", ""),
                              "asked": now_ms(), "answered": False, "settled": False,
                              "pooled": to.startswith("pool:"), "items": 0}
    budget = int(ATTEMPTS * FIRST_REPLY_S * 1000 + sum(BACKOFF_S) * 1200)
    say("request_sent", requestId=req["request_id"], messageId=req["message_id"],
        fromAgentId=AGENT, toAgentId=to, conversationId=context,
        deadlineMs=now_ms() + budget, timeoutMs=budget, taskId=task)
    send(req["request_id"])


def send(rid: str) -> None:
    op = ops[rid]
    if op["pooled"] and op["task"] in member_of:       # its retries too (A2M-RETRY-8)
        op["topic"] = f"$a2a/v1/request/{ORG}/{UNIT}/{member_of[op['task']]}"
        op["pooled"] = False
    corr = op["corr"][0] if op["corr"] and "same-correlation" in BUGS else uuid.uuid4().hex
    op["corr"].append(corr)
    by_corr[corr] = rid
    if op["method"] in ("GetTask", "CancelTask"):
        params: dict = {"id": op["task"]}
    else:
        message = {"messageId": f"{rid}.{len(op['corr'])}", "role": "ROLE_USER",
                   "taskId": op["task"], "parts": [{"text": op["text"]}]}
        if op["context"]:
            message["contextId"] = op["context"]
        params = {"message": message}
    p = Properties(PacketTypes.PUBLISH)
    p.ResponseTopic, p.CorrelationData = REPLY, bytes.fromhex(corr)
    client.publish(op["topic"], json.dumps({"jsonrpc": "2.0", "id": corr, "method":
                                            op["method"], "params": params}), qos=1,
                   properties=p)
    attempt = len(op["corr"])
    threading.Timer(FIRST_REPLY_S, no_first_reply, (rid, attempt)).start()


def no_first_reply(rid: str, attempt: int) -> None:
    with lock:
        op = ops[rid]
        if op["answered"] or op["settled"] or len(op["corr"]) != attempt:
            return
        if attempt >= ATTEMPTS:
            settle(rid, "NO_RESPONSE")
            return
        wait = BACKOFF_S[attempt - 1] * random.uniform(0.8, 1.2)
        threading.Timer(wait, retry, (rid,)).start()


def retry(rid: str) -> None:
    """After the backoff, unless a reply came meanwhile (a late one still stops it)."""
    with lock:
        if "stale-backoff" in BUGS or not ops[rid]["answered"] and not ops[rid]["settled"]:
            send(rid)


def settle(rid: str, outcome: str) -> None:
    op = ops[rid]
    op["settled"] = True
    if rid.endswith(".get"):
        return                                         # its own follow-up: nobody asked
    say("request_settled", requestId=rid, outcome=outcome, latencyMs=now_ms() - op["asked"],
        responseMessageId=None, taskId=op["task"])


def stream_idle(rid: str, items: int) -> None:
    """No stream item for STREAM_IDLE_S since the one counted `items`: the operation ends,
    and GetTask on its Task.id asks where the task stands (A2M-RETRY-7)."""
    with lock:
        op = ops[rid]
        if op["settled"] or op["items"] != items:
            return
        if "republishes-stalled-streams" in BUGS:
            send(rid)
            return
        settle(rid, "NO_RESPONSE")
        member = op.get("member")                      # a pool's: its own topic (A2M-REQ-4)
        topic = f"$a2a/v1/request/{ORG}/{UNIT}/{member}" if member else op["topic"]
        ops[rid + ".get"] = {**op, "method": "GetTask", "corr": [], "answered": False,
                             "settled": False, "asked": now_ms(), "items": 0, "topic": topic,
                             "pooled": not member and op["pooled"]}
        send(rid + ".get")


def on_message(_c: mqtt.Client, _u: object, m: mqtt.MQTTMessage) -> None:
    corr = getattr(m.properties, "CorrelationData", None)
    with lock:
        rid = by_corr.get(corr.hex()) if corr is not None else None
        if rid is None and "settles-by-task-id" in BUGS:
            rid = _by_task(m.payload)
        if rid is None or ops[rid]["settled"]:
            return                                     # A2M-REQ-2: not ours, ignored
        op = ops[rid]
        if op["pooled"] and _named(m) is None and "trusts-unnamed-pool-replies" not in BUGS:
            return                                     # A2M-REQ-3: a protocol error, ignored
        op["member"] = _named(m) or op.get("member")
        if op["member"]:
            member_of[op["task"]] = op["member"]
        op["answered"] = True                          # no retry after this (A2M-RETRY-4)
        try:
            body = json.loads(m.payload)
        except ValueError:
            return
        if not isinstance(body, dict) or "error" in body:
            code = (body.get("error") or {}).get("code") if isinstance(body, dict) else None
            if code == -32005 and "retries-protocol-errors" in BUGS and len(op["corr"]) < ATTEMPTS:
                op["answered"] = False
                threading.Timer(BACKOFF_S[0], retry, (rid,)).start()
                return
            settle(rid, "FAILED")
            return
        result = body.get("result") or {}
        item = result.get("statusUpdate") or result.get("task") or result
        state = (item.get("status") or {}).get("state") if isinstance(item, dict) else None
        if "waits-out-the-stream" in BUGS and "statusUpdate" in result:
            state = None                               # only a Task result ends it
        if state in FINAL or op["method"] in ("GetTask", "CancelTask"):
            settle(rid, FINAL.get(state, "COMPLETED"))
            return
        op["items"] += 1
        idle = threading.Timer(STREAM_IDLE_S, stream_idle, (rid, op["items"]))
        idle.daemon = True
        idle.start()


def _named(m: mqtt.MQTTMessage) -> str | None:
    """The responder a reply names (User Property a2a-responder-agent-id)."""
    return next((v for k, v in getattr(m.properties, "UserProperty", None) or ()
                 if k == "a2a-responder-agent-id"), None)


def _by_task(payload: bytes) -> str | None:
    """--bug settles-by-task-id: the open request of the task a reply names."""
    try:
        result = json.loads(payload).get("result") or {}
    except (ValueError, AttributeError):
        return None
    item = result.get("statusUpdate") or result.get("task") or result
    task = item.get("id") or item.get("taskId") if isinstance(item, dict) else None
    return next((rid for rid, op in ops.items() if op["task"] == task and not op["settled"]
                 and op["method"] == "SendMessage"), None)


def on_subscribe(_c: mqtt.Client, _u: object, _mid: int, _codes: object, _p: object) -> None:
    say("executors_registered", registered=0, expected=0, agents=[], subscribed=[REPLY])
    subscribed.set()


client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=node["client_id"] or ME,
                     protocol=mqtt.MQTTv5)
client.on_message = on_message
client.on_subscribe = on_subscribe
client.on_connect = lambda c, _u, _f, _rc, _p: c.subscribe(REPLY, qos=1)
expiry = Properties(PacketTypes.CONNECT)
expiry.SessionExpiryInterval = 600
client.connect(spec["broker"][0], spec["broker"][1], keepalive=5, clean_start=False,
               properties=expiry)
client.loop_start()


class Leave(Exception):
    """SIGTERM: stop as the stop line asks (an operator, `docker stop`, a graceful restart)."""


def on_sigterm(signum: int, frame: object) -> None:
    raise Leave


signal.signal(signal.SIGTERM, on_sigterm)
try:
    for raw in sys.stdin:                              # the bench's lines: what to ask, stop
        op = json.loads(raw)
        if op.get("op") == "stop":
            break
        if op.get("op") in FAULT_OPS:
            say("harness_error", error=f"cannot carry out {op['op']}", op=op["op"])
        if op.get("op") == "request":
            subscribed.wait()                          # A2M-SESS-2: never before
            with lock:
                ask(op)
except Leave:
    pass
client.disconnect()
client.loop_stop()
