"""The clauses of the A2A-over-MQTT transport profile v0.1, one row each, with a short stable
id: what the profile's checkers, seeded defects and `conform` cite, and what
docs/profiles/a2a-mqtt.md is generated from (`python -m bench.protocols.a2a_mqtt.clauses`;
a test fails when the checked-in page differs).

Read from `a2a-over-mqtt/specification/0.1/basic/mqtt_transport.md` of `emqx/mqtt-for-ai`
at commit e533bd7 (2026-04-09); `architecture.md` there states no requirement. The text of
each row is our summary, not the spec's words: the section and item number point at them.
Every MUST of the Core conformance level is here; SHOULDs where a deployment's failure
shows on the wire; the Extended level's optional modes (the untrusted-broker profile,
native binary artifacts, broker-managed status) by their MUSTs, marked Extended.
No I/O: a table and the page it prints.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import StrEnum

SPEC = "emqx/mqtt-for-ai a2a-over-mqtt/specification/0.1/basic/mqtt_transport.md"
SPEC_COMMIT = "e533bd7"


class Level(StrEnum):
    MUST = "MUST"
    MUST_NOT = "MUST NOT"
    SHOULD = "SHOULD"
    MAY = "MAY"


class Role(StrEnum):
    """Whom a clause binds."""

    REQUESTER = "requester"
    RESPONDER = "responder"
    AGENT = "agent"                  # both: every client of the profile
    SUBSCRIBER = "discovery subscriber"
    POOL = "pool member"
    BROKER = "broker"


class Conformance(StrEnum):
    CORE = "Core"
    EXTENDED = "Extended"


@dataclass(frozen=True, slots=True)
class Clause:
    id: str
    level: Level
    role: Role
    section: str          # the spec's heading, and the item number under it
    text: str
    conformance: Conformance = Conformance.CORE


C, R, Q, A, S, P, B = (Conformance, Role.RESPONDER, Role.REQUESTER, Role.AGENT,
                       Role.SUBSCRIBER, Role.POOL, Role.BROKER)
MUST, MUST_NOT, SHOULD, MAY = Level.MUST, Level.MUST_NOT, Level.SHOULD, Level.MAY

CLAUSES: tuple[Clause, ...] = (
    # -- the base specification
    Clause("A2M-BASE-1", MUST, R, "The MQTT Transport for A2A (A2A base specification)",
           "A2A v1.0's data structures, method semantics and error codes hold unless the "
           "profile overrides them: a task's state says what became of its work — "
           "`TASK_STATE_COMPLETED` when its agent succeeded, `TASK_STATE_FAILED` when it "
           "failed."),
    Clause("A2M-BASE-2", MUST, R, "The MQTT Transport for A2A (A2A base specification); "
           "A2A v1.0 §3.1 Core Operations",
           "GetTask and CancelTask, two of the core operations every A2A implementation "
           "supports, answer for a task the agent has with that task (a CancelTask of one "
           "that ended: `TaskNotCancelableError`), never with an error that denies it — "
           "method not found, task not found."),
    # -- topics and identifiers
    Clause("A2M-TOPIC-1", MUST, A, "Topic Model / Discovery Topic",
           "Agent Cards are published retained at `$a2a/v1/discovery/{org_id}/{unit_id}/{agent_id}`."),
    Clause("A2M-TOPIC-2", SHOULD, A, "Topic Model / Direct Interaction Topics",
           "Interaction topics are `$a2a/v1/{method}/{org_id}/{unit_id}/{agent_id}` "
           "(method `request`, `reply` or `event`)."),
    Clause("A2M-TOPIC-3", MUST, Q, "Optional Shared Subscription Dispatch 2–3",
           "Pooled requests go to `$a2a/v1/request/{org_id}/{unit_id}/pool/{pool_id}`, never to "
           "a `$share/...` topic.", C.EXTENDED),
    Clause("A2M-ID-1", MUST, A, "Identifier Format 1",
           "`org_id`, `unit_id`, `agent_id`, `pool_id` and `group_id` match `^[A-Za-z0-9_.-]+$`."),
    # -- sessions
    Clause("A2M-SESS-1", MUST, A, "Client Session Requirements 1", "Clients use MQTT v5."),
    Clause("A2M-SESS-2", MUST, Q, "Client Session Requirements 2",
           "A requester subscribes to its reply topic before it publishes a request naming "
           "that topic as Response Topic."),
    Clause("A2M-SESS-3", MUST, A, "Client Session Requirements 3",
           "The MQTT Client ID is `{org_id}/{unit_id}/{agent_id}`."),
    Clause("A2M-SESS-4", SHOULD, Q, "Client Session Requirements 4",
           "The reply topic's suffix is collision resistant: concurrent requesters never share "
           "a reply stream."),
    Clause("A2M-SESS-5", SHOULD, A, "Client Session Requirements 5",
           "A reconnect keeps the session and its subscriptions where the broker allows."),
    Clause("A2M-SESS-6", MUST, A, "Client Session Requirements 6",
           "A connection that carries bearer tokens uses TLS."),
    # -- discovery and presence
    Clause("A2M-DISC-1", SHOULD, A, "Discovery Publisher Behavior 1",
           "An agent registers by publishing its card retained, at QoS 1."),
    Clause("A2M-DISC-2", SHOULD, A, "Discovery Publisher Behavior 2",
           "An agent unregisters by clearing its retained card (an empty retained message)."),
    Clause("A2M-DISC-3", MUST, S, "Discovery Subscriber Behavior 2",
           "A retained card is the agent's current registration; a later one on the same topic "
           "replaces it (item 3, SHOULD)."),
    Clause("A2M-PRES-1", SHOULD, A, "Presence and Liveness / Liveness 1–2",
           "The retained card carries User Properties `a2a-status=online` and "
           "`a2a-status-source=agent`."),
    Clause("A2M-PRES-2", SHOULD, A, "Presence and Liveness / LWT 1",
           "The Last Will is the card on the discovery topic, retained, QoS 1, with "
           "`a2a-status=offline` and `a2a-status-source=lwt`."),
    Clause("A2M-PRES-3", SHOULD, A, "Presence and Liveness / LWT 3",
           "Before a graceful disconnect the agent republishes its card with "
           "`a2a-status=offline`, `a2a-status-source=agent`."),
    Clause("A2M-PRES-4", MUST, S, "Presence Subscriber Behavior 2",
           "`a2a-status` is advisory: it never replaces request/reply error handling and retry "
           "(an `offline` card does not make a request fail without being tried, an `online` "
           "one does not make it succeed)."),
    # -- request/reply
    Clause("A2M-RR-1", SHOULD, Q, "Request/Reply Mapping 1",
           "Requests go to `$a2a/v1/request/{org_id}/{unit_id}/{agent_id}` at QoS 1."),
    Clause("A2M-RR-2", MUST, Q, "Request/Reply Mapping 2",
           "Every request carries MQTT 5 Response Topic and Correlation Data."),
    Clause("A2M-RR-3", MUST, R, "Request/Reply Mapping 3; Responder Behavior 5",
           "Every reply and stream item goes to the request's Response Topic and echoes its "
           "Correlation Data unchanged (QoS 1, SHOULD: Responder Behavior 6)."),
    Clause("A2M-RR-4", MUST_NOT, A, "Request/Reply Mapping 5",
           "Correlation Data is never used as the A2A task identifier."),
    Clause("A2M-RR-5", MUST, Q, "Request/Reply Mapping 6",
           "A request that creates a task carries a requester-generated UUIDv4 `Task.id` "
           "(`Message.task_id`)."),
    Clause("A2M-RR-6", MUST, R, "Request/Reply Mapping 7; Responder Behavior 4",
           "The responder tracks the task under the requester's `Task.id` and echoes it in "
           "every reply and stream item of that task."),
    Clause("A2M-RR-7", MUST, Q, "Request/Reply Mapping 8",
           "Every later operation on a task (GetTask, CancelTask, a continuation) uses the same "
           "`Task.id`."),
    # -- requester
    Clause("A2M-REQ-1", MUST, Q, "Requester Behavior 1–2",
           "The requester keeps its in-flight requests by Correlation Data, unique among those "
           "in flight on one reply topic."),
    Clause("A2M-REQ-2", MUST, Q, "Requester Behavior 5",
           "A reply with unknown or missing Correlation Data is a protocol error and is "
           "ignored: it settles no request."),
    Clause("A2M-REQ-3", MUST, Q, "Requester Behavior 6",
           "A reply to a pooled request without `a2a-responder-agent-id` is a protocol error.",
           C.EXTENDED),
    Clause("A2M-REQ-4", MUST, Q, "Requester Behavior 7; Shared Subscription Dispatch 11",
           "For a pooled request that creates a task the requester keeps (`Task.id`, "
           "`a2a-responder-agent-id`) and sends follow-ups to that responder's direct topic "
           "(SHOULD).", C.EXTENDED),
    Clause("A2M-REQ-5", MUST, Q, "Requester Behavior 4; OAuth 2.0 and OIDC 2",
           "Where the responder requires it, every request carries `a2a-authorization: Bearer "
           "<token>`."),
    # -- responder
    Clause("A2M-RSP-1", MUST, R, "Responder Behavior 1",
           "The responder subscribes to its direct request topic (and MAY to a pool's)."),
    Clause("A2M-RSP-2", SHOULD, R, "Responder Behavior 2",
           "A request without Response Topic or Correlation Data is rejected as invalid; with "
           "no reply path it MAY be dropped. Either way it is not executed."),
    Clause("A2M-RSP-3", MUST, R, "Responder Behavior 3",
           "Request payloads are validated; an invalid one gets a protocol or application "
           "error on the reply path when there is one."),
    Clause("A2M-RSP-4", MUST, R, "Responder Behavior 4",
           "A request to create a task with a missing or non-UUIDv4 `Task.id` is rejected as "
           "invalid protocol input, and not executed."),
    Clause("A2M-RSP-5", MUST, R, "Responder Behavior 7; Shared Subscription Dispatch 10",
           "A reply to a pooled request carries `a2a-responder-agent-id` with the concrete "
           "responder's `agent_id`.", C.EXTENDED),
    Clause("A2M-RSP-6", MUST_NOT, R, "Responder Behavior 8; OAuth 2.0 and OIDC 6",
           "A bearer token is never echoed, in a payload or an MQTT property."),
    Clause("A2M-RSP-7", MUST, R, "OAuth 2.0 and OIDC 4",
           "Where tokens are required, a request is processed only after its token's `exp`, "
           "`iss`, `aud` and scopes were validated."),
    # -- handover
    Clause("A2M-HAND-1", MUST, R, "Optional Task Handover 2",
           "A reply that hands a task over carries `a2a-responder-agent-id` naming the "
           "delegate.", C.EXTENDED),
    Clause("A2M-HAND-2", MUST, Q, "Optional Task Handover 3–4",
           "The requester sends every later operation on the task to the agent named by the "
           "most recent `a2a-responder-agent-id` it received for that `Task.id`.", C.EXTENDED),
    # -- multi-turn
    Clause("A2M-CTX-1", MUST, R, "Multi-Turn / Context Identifier Semantics 4",
           "The responder preserves and echoes the requester's `Task.context_id` in every "
           "response of tasks in that context."),
    Clause("A2M-CTX-2", MUST, R, "Multi-Turn / Context Identifier Semantics 5",
           "An unknown `Task.context_id` starts a new context (it is not an error)."),
    Clause("A2M-CTX-3", MUST, R, "Multi-Turn / Context Identifier Semantics 6",
           "A request whose `Task.context_id` differs from the one stored for its `Task.id` is "
           "rejected with JSON-RPC -32602 (invalid params), and changes nothing."),
    Clause("A2M-CTX-4", MUST, A, "Multi-Turn / Context Identifier Semantics 7",
           "If both are present, User Property `a2a-context-id` equals `Message.context_id` "
           "(the payload is authoritative)."),
    Clause("A2M-CTX-5", MUST, Q, "Multi-Turn / Interaction Patterns 3",
           "A task interrupted (`input-required`, `auth-required`) is continued with the same "
           "`Task.id` and `Task.context_id` and new Correlation Data."),
    # -- retry and timeout
    Clause("A2M-RETRY-1", MUST, Q, "Requester Retry and Timeout Profile 2",
           "Defaults (configurable): first reply within 15,000 ms, stream idle 30,000 ms, 3 "
           "attempts in all, backoff 1,000 / 2,000 / 4,000 ms ±20 %."),
    Clause("A2M-RETRY-2", MUST, Q, "Requester Retry and Timeout Profile 3",
           "Each attempt of one logical operation has new Correlation Data and the same "
           "`Task.id`."),
    Clause("A2M-RETRY-3", MUST, R, "Requester Retry and Timeout Profile 4",
           "The responder deduplicates retried requests on `Task.id`: a request for a task "
           "it already has (the same `Task.id` under new Correlation Data) returns that "
           "task's state and never creates (or executes) it again."),
    Clause("A2M-RETRY-4", MUST, Q, "Requester Retry and Timeout Profile 5",
           "The requester stops retrying at the first valid correlated reply, success or "
           "error."),
    Clause("A2M-RETRY-5", MUST, Q, "Requester Retry and Timeout Profile 6",
           "A publish not accepted, or no first reply within `reply_first_timeout_ms`, is "
           "retried until `max_attempts`, and not beyond."),
    Clause("A2M-RETRY-6", MUST_NOT, Q, "Requester Retry and Timeout Profile 7",
           "Once any correlated stream item arrived, the original request is not published "
           "again."),
    Clause("A2M-RETRY-7", SHOULD, Q, "Requester Retry and Timeout Profile 8",
           "A stream stalled past `stream_idle_timeout_ms` is recovered with GetTask on the "
           "same `Task.id`, not by republishing the request."),
    Clause("A2M-RETRY-8", MUST, Q, "Requester Retry and Timeout Profile 9",
           "Pooled retries go to the pool topic until the responder is known, then to its "
           "direct topic.", C.EXTENDED),
    Clause("A2M-RETRY-9", SHOULD, Q, "Requester Retry and Timeout Profile 10",
           "A request's Message Expiry Interval, if set, exceeds `reply_first_timeout_ms`."),
    # -- pools
    Clause("A2M-POOL-1", MUST, P, "Optional Shared Subscription Dispatch 4–5, 8",
           "Members of one pool share one `group_id` (`$share/{group_id}/$a2a/v1/request/"
           "{org_id}/{unit_id}/pool/{pool_id}`), never a random per-instance one.",
           C.EXTENDED),
    # -- streaming
    Clause("A2M-STREAM-1", MUST, R, "Streaming Reply Mapping 1–2",
           "Each stream item is its own MQTT message on the Response Topic, echoing the "
           "request's Correlation Data."),
    Clause("A2M-STREAM-2", MUST, A, "Streaming Reply Mapping 5–6",
           "A status of COMPLETED, FAILED, CANCELED or REJECTED ends the stream of that "
           "correlation: nothing follows it on that correlation, and the requester takes it "
           "as completion."),
    Clause("A2M-STREAM-3", MUST, Q, "Streaming Reply Mapping 7",
           "`input-required` or `auth-required` ends the current correlation's stream: the "
           "requester drops its in-flight state for that Correlation Data."),
    # -- errors and duplicates
    Clause("A2M-DUP-1", MUST, A, "Error Handling and Deduplication 1",
           "Duplicate delivery (QoS 1) is tolerated: a redelivered request executes nothing "
           "twice; a redelivered reply settles nothing twice."),
    Clause("A2M-DUP-2", SHOULD, R, "Error Handling and Deduplication 5",
           "A request past its Message Expiry before processing is dropped (an error -32003 "
           "MAY be sent)."),
    Clause("A2M-ERR-1", MUST, R, "Binding-Specific Error Mapping 1–2",
           "An error reply is a JSON-RPC `error` object and echoes the Correlation Data."),
    Clause("A2M-ERR-2", MUST, R, "Binding-Specific Error Mapping 4–6",
           "Request expired: -32003 `request_expired`; responder unavailable: -32004 "
           "`responder_unavailable`; binding metadata invalid or missing: -32005 "
           "`transport_protocol_error` — in `error.data.a2a_error`, exactly."),
    Clause("A2M-ERR-3", MUST, Q, "Binding-Specific Error Mapping 7–8",
           "-32003 and -32004 are retry-eligible; -32005 is not retried unless the request "
           "is corrected."),
    Clause("A2M-PROP-1", MUST, A, "A2A User Property Naming 1",
           "User Properties this binding defines carry the `a2a-` prefix."),
    Clause("A2M-PROP-2", SHOULD, A, "Error Handling and Deduplication 3",
           "Unknown `a2a-` User Properties are ignored unless this profile marks them "
           "mandatory."),
    Clause("A2M-QOS-1", MUST, B, "QoS Guidance 3",
           "Brokers and clients support QoS 1 on discovery, request and reply paths."),
    # -- extended modes
    Clause("A2M-UBSP-1", MUST, R, "Optional Untrusted-Broker Security Profile 11",
           "Under `a2a-security-profile=ubsp-v1`, a request whose `a2a-recipient-agent-id` is "
           "not this responder is rejected as `transport_protocol_error`.", C.EXTENDED),
    Clause("A2M-BIN-1", MUST, R, "Optional MQTT Native Binary Artifact Mode 6",
           "Without a supported `a2a-artifact-mode=binary` request, artifacts are JSON.",
           C.EXTENDED),
    Clause("A2M-BROKER-1", MUST, S, "Optional Broker-Managed Status 3",
           "Broker-managed status is advisory transport metadata, never a replacement for "
           "request/reply error handling.", C.EXTENDED),
)

BY_ID = {c.id: c for c in CLAUSES}


def clause(clause_id: str) -> Clause:
    """The clause `clause_id`; KeyError names it if the table has no such row."""
    try:
        return BY_ID[clause_id]
    except KeyError:
        raise KeyError(f"no clause {clause_id!r} in the A2A-over-MQTT table") from None


def page() -> str:
    """docs/profiles/a2a-mqtt.md's clause table, as the code holds it."""
    lines = [
        "# A2A over MQTT v0.1: the clauses the bench holds agents to",
        "",
        "<!-- generated by `python -m bench.protocols.a2a_mqtt.clauses`; do not edit by hand -->",
        "",
        f"Source: `{SPEC}` at commit `{SPEC_COMMIT}`. Each row is our summary; the section",
        "and item number point at the spec's own words. Ids are stable: rules, seeded",
        "defects and `conform` cite them.",
        "",
        "| id | level | binds | conformance | section | clause |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {c.id} | {c.level} | {c.role} | {c.conformance} | {c.section} | {c.text} |"
              for c in CLAUSES]
    counts = {lv: sum(c.level is lv for c in CLAUSES) for lv in Level}
    lines += ["", f"{len(CLAUSES)} clauses: " + ", ".join(f"{n} {lv}" for lv, n in
                                                         counts.items() if n) + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(page())
