"""The A2A-over-MQTT profile's conform kit (bench/protocols/__init__.py,
`ProtocolSpec.conform`): CMD as every responder, the reference requester in front, or as
the requester in front of the reference responders, on Mosquitto; one row per clause of
the profile's table (`clauses`, docs/profiles/a2a-mqtt.md) that binds the role, grouped
MUST / SHOULD / MAY as A2A's TCK groups requirements. A clause no rule of the bench
observes yet says so (`unjudged`), and what an agent may declare it leaves out —
Extended clauses (`--core`), bearer tokens (`--no-tokens`) — makes its clauses not
applicable (`DECLARATIONS`). Plain data: conform (bench/conform.py) runs and judges it."""

from __future__ import annotations

from dataclasses import replace

from bench.protocols import ConformRule, Declaration, TableClause
from bench.protocols.a2a_mqtt import clauses

#: The responder's suite, CMD as every responder: (scenario, seconds, what)
RESPONDER_SUITE: tuple[tuple[str, float, str], ...] = (
    ("a2a_quickstart", 6, "requests and replies, nothing breaking"),
    ("a2a_restart", 30, "a SIGKILL mid-task for 20 s: retries under the same Task.id"),
    ("a2a_tampered", 20, "Correlation Data stripped and altered on the way"),
    ("a2a_malformed", 8, "requests it must refuse, one case after another"),
    ("a2a_pool", 6, "a shared-subscription pool (Extended)"),
    ("a2a_multiturn", 14, "questions and next turns, streams, GetTask, CancelTask, a kill"),
    ("a2a_lost_reply_restart", 30, "replies lost, a restart, then the retries arrive"),
    ("a2a_bad_input", 12, "the bad input that kills no careless responder, case by case"),
    ("a2a_bad_types", 14, "every field it reads given every JSON type it may not have"),
    ("a2a_bad_values", 10, "every field it reads given a value of its type the rules forbid"),
    ("a2a_bad_properties", 10, "every MQTT 5 property it reads, in each form the profile "
     "forbids or lets vary"),
    ("a2a_graceful_restart", 12, "stopped with SIGTERM mid-task, started again"),
    ("a2a_oauth", 14, "bearer tokens required: spoilt ones refused, none echoed, over TLS"),
    ("a2a_handover", 20, "a card owner hands its tasks over to a delegate (Extended)"),
    ("a2a_redelivered", 20, "requests delivered again by the broker, with DUP"),
)

#: The clauses of every agent's session, judged of a responder and of a requester alike
SESSION_RULES: tuple[ConformRule, ...] = (
    ConformRule("A2M-SESS-1", "MQTT 5", ("a2a_session.connects_with_mqtt5",),
                ("a2a_quickstart",)),
    ConformRule("A2M-SESS-5", "a session that outlives the connection",
                ("a2a_session.connects_with_a_persistent_session",),
                ("a2a_quickstart", "a2a_restart")),
    ConformRule("A2M-SESS-3, A2M-ID-1", "the client id is {org}/{unit}/{agent}, every id of "
                "[A-Za-z0-9_.-]",
                ("a2a_session.connects_as_org_unit_agent",), ("a2a_quickstart",)),
    ConformRule("A2M-PROP-1", "the binding's User Properties carry their a2a- prefix",
                ("a2a_session.binding_properties_carry_the_prefix",), ("a2a_quickstart",)),
    ConformRule("A2M-TOPIC-2", "what it publishes and subscribes under $a2a/ is an "
                "interaction topic $a2a/v1/{method}/{org_id}/{unit_id}/{agent_id}",
                ("a2a_session.interaction_topics_keep_the_shape",), ("a2a_quickstart",)),
)
#: The responder's clauses each judged by rules of the bench, and the runs that put it there
_RESPONDER_RULES: tuple[ConformRule, ...] = (
    *SESSION_RULES,
    ConformRule("A2M-TOPIC-1, A2M-DISC-1, A2M-PRES-1, A2M-PRES-2",
                "the card retained at QoS 1 on its own discovery topic, online; the Last Will "
                "on it",
                ("a2a_session.announces_its_card_with_a_will",), ("a2a_quickstart",)),
    ConformRule("A2M-RETRY-3, A2M-DUP-1",
                "a Task.id runs once, across retries, redeliveries and restarts",
                ("duplicate_execution.executed_once",),
                ("a2a_quickstart", "a2a_restart", "a2a_lost_reply_restart", "a2a_redelivered")),
    ConformRule("A2M-RR-3, A2M-STREAM-1, A2M-ERR-1",
                "replies and stream items on the request's Response Topic with its "
                "Correlation Data",
                ("a2a_replies.replies_answer_a_request",),
                ("a2a_quickstart", "a2a_restart", "a2a_tampered")),
    ConformRule("A2M-RR-3", "every request it took in ends in a final answer, unless a fault "
                "or a stop explains the loss (liveness)",
                ("a2a_replies.every_request_answered",),
                ("a2a_quickstart", "a2a_restart", "a2a_multiturn", "a2a_lost_reply_restart")),
    ConformRule("A2M-RSP-1", "subscribes its direct request topic",
                ("a2a_session.subscribes_its_request_topic",), ("a2a_quickstart",)),
    ConformRule("A2M-RR-6, A2M-RR-4", "every reply of a task echoes the requester's Task.id, "
                "never the Correlation Data",
                ("a2a_replies.replies_echo_the_task_id",), ("a2a_quickstart", "a2a_restart")),
    ConformRule("A2M-STREAM-2", "nothing follows a correlation's final answer",
                ("a2a_replies.nothing_after_the_final_answer",),
                ("a2a_quickstart", "a2a_restart")),
    ConformRule("A2M-RSP-2", "a request without Correlation Data is refused, never run",
                ("a2a_replies.refused_requests_run_nothing",), ("a2a_tampered",)),
    ConformRule("A2M-RSP-3, A2M-RSP-4, A2M-CTX-4, A2M-ERR-2",
                "a malformed request gets the error the profile names and runs nothing",
                ("a2a_replies.malformed_requests_refused",),
                ("a2a_malformed", "a2a_bad_input", "a2a_bad_types", "a2a_bad_values",
                 "a2a_bad_properties")),
    ConformRule("A2M-PROP-2", "a request carrying an a2a- User Property the profile does not "
                "define is served as if it were not there",
                ("a2a_replies.unknown_properties_ignored",), ("a2a_bad_properties",)),
    ConformRule("A2M-BIN-1", "a request asking for an artifact mode nobody supports is "
                "answered in JSON", ("a2a_replies.unknown_artifact_modes_answered_in_json",),
                ("a2a_bad_properties",)),
    ConformRule("A2M-BASE-1", "a task ends as its agent did: COMPLETED when it succeeded, "
                "INPUT_REQUIRED when it asked, FAILED when it failed",
                ("a2a_replies.tasks_end_as_their_agent_did",),
                ("a2a_quickstart", "a2a_multiturn")),
    ConformRule("A2M-RSP-5", "a reply to a pooled request names its responder",
                ("a2a_pools.pooled_replies_name_their_responder",), ("a2a_pool",)),
    ConformRule("A2M-PRES-3", "leaving on purpose, its card offline before the DISCONNECT",
                ("a2a_session.leaves_offline",), ("a2a_quickstart", "a2a_graceful_restart")),
    ConformRule("A2M-CTX-1, A2M-CTX-3",
                "a task keeps its context; a request naming another is refused (-32602)",
                ("a2a_replies.contexts_are_kept",), ("a2a_multiturn", "a2a_malformed")),
    ConformRule("A2M-RETRY-3", "a task that ended stays ended (retries, GetTask, CancelTask, "
                "restarts)", ("a2a_replies.ended_tasks_stay_ended",),
                ("a2a_multiturn", "a2a_restart", "a2a_lost_reply_restart")),
    ConformRule("A2M-BASE-2", "GetTask and CancelTask of a task it said it has are answered "
                "with the task, never an error that denies it (A2A's core operations)",
                ("a2a_replies.known_tasks_stay_known",),
                ("a2a_multiturn", "a2a_restart", "a2a_lost_reply_restart"),
                exercised="follow_ups_of_a_task_it_had"),
    ConformRule("A2M-RSP-7", "a request whose bearer token is missing, expired, for another "
                "audience or issuer, forged or short of the scope is refused, and runs "
                "nothing; one whose token is good is not refused",
                ("a2a_oauth.unauthorized_requests_refused", "a2a_oauth.good_tokens_honoured"),
                ("a2a_oauth",)),
    ConformRule("A2M-RSP-6", "no bearer token echoed in a reply's payload or properties",
                ("a2a_session.tokens_never_echoed",), ("a2a_oauth",)),
    ConformRule("A2M-SESS-6", "a connection that carries bearer tokens came by TLS",
                ("a2a_session.tokens_travel_over_tls",), ("a2a_oauth",)),
    ConformRule("A2M-CTX-2", "a request naming a context it does not know opens it, with no "
                "error", ("a2a_replies.new_contexts_are_welcome",),
                ("a2a_quickstart", "a2a_multiturn"), exercised="contexts_opened"),
    ConformRule("A2M-POOL-1", "the members of a pool share one group_id",
                ("a2a_pools.pool_members_share_a_group",), ("a2a_pool",),
                exercised="pool_subscriptions"),
    ConformRule("A2M-HAND-1", "a task handed over: what the card owner sends on reaches its "
                "delegate with its reply path, and every reply of the delegate names it",
                ("a2a_handover.handed_over_replies_name_their_agent",
                 "a2a_handover.handed_over_requests_reach_their_agent"), ("a2a_handover",)),
)

#: A requester's suite: CMD as the requester in front of the reference responders
REQUESTER_SUITE: tuple[tuple[str, float, str], ...] = (
    ("a2a_quickstart", 6, "requests and replies, nothing breaking"),
    ("a2a_restart", 30, "its responder SIGKILLed for 20 s: first-reply waits and retries"),
    ("a2a_reply_in_backoff", 20, "answers 14–16 s late: many land while it waits to retry"),
    ("a2a_multiturn", 14, "questions to answer, streams, GetTask, CancelTask"),
    ("a2a_oauth", 14, "bearer tokens required on every request, retries and follow-ups"),
    ("a2a_pool", 6, "a pool's member named in replies: follow-ups go to it (Extended)"),
    ("a2a_handover", 20, "a task handed over to a delegate: follow-ups go to it (Extended)"),
    ("a2a_redelivered", 20, "replies delivered again by the broker, with DUP"),
    ("a2a_stray_replies", 30, "replies that lose their Correlation Data on the way"),
    ("a2a_pool_unnamed", 30, "a pool of one whose replies lose the member's name on the way"),
    ("a2a_binding_errors", 20, "refused -32004 by a busy responder, -32005 for metadata a "
                               "gateway spoilt"),
    ("a2a_stream_stall", 60, "streams that bring nothing for 40 s: recovered with GetTask"),
    ("a2a_reply_extras", 10, "replies carrying an a2a- User Property the profile does not "
     "define"),
)
#: The requester's clauses each judged by rules of the bench (from its wire)
_REQUESTER_RULES: tuple[ConformRule, ...] = (
    *SESSION_RULES,
    ConformRule("A2M-RR-2, A2M-RR-5, A2M-SESS-2",
                "Response Topic subscribed first, Correlation Data, a UUIDv4 Task.id",
                ("a2a_requests.requests_carry_a_reply_path",),
                ("a2a_quickstart", "a2a_restart", "a2a_multiturn")),
    ConformRule("A2M-RETRY-2, A2M-RETRY-4, A2M-RETRY-6",
                "new Correlation Data per attempt; nothing sent again once a reply came",
                ("a2a_requests.no_request_again_after_a_reply",),
                ("a2a_restart", "a2a_reply_in_backoff", "a2a_multiturn")),
    ConformRule("A2M-RETRY-5, A2M-RETRY-4", "every operation it took on ends — an answer, an "
                "error, or its give-up after its attempts — within the profile's budget "
                "(liveness)", ("a2a_requests.every_operation_settles",),
                ("a2a_quickstart", "a2a_restart", "a2a_multiturn", "a2a_stream_stall")),
    ConformRule("A2M-RETRY-1, A2M-RETRY-5", "a retry only after the profile's default waits "
                "(15 s, then backoff 1 s, 2 s ±20 %), at most three attempts",
                ("a2a_requests.retries_keep_the_profile",),
                ("a2a_restart", "a2a_reply_in_backoff")),
    ConformRule("A2M-CTX-5, A2M-RR-7", "a task sent again keeps its Task.id and context",
                ("a2a_requests.turns_keep_the_task_and_context",), ("a2a_multiturn",)),
    ConformRule("A2M-REQ-5", "every request to a responder requiring them carries a bearer "
                "token", ("a2a_oauth.requests_carry_a_token",), ("a2a_oauth",)),
    ConformRule("A2M-REQ-4, A2M-HAND-2, A2M-RETRY-8", "follow-ups go to the agent a reply "
                "named; a pooled request is retried to its pool until then",
                ("a2a_requests.follow_ups_go_to_the_named_agent",), ("a2a_handover",),
                # a shared pool does not form on Mosquitto 2.0.11 ($share on a $ topic):
                # there a pool of one that subscribes its pool's topic itself judges it
                one_of=("a2a_pool", "a2a_pool_unnamed")),
    ConformRule("A2M-SESS-6", "a connection that carries bearer tokens came by TLS",
                ("a2a_session.tokens_travel_over_tls",), ("a2a_oauth",)),
    ConformRule("A2M-RR-1, A2M-TOPIC-2, A2M-TOPIC-3", "requests go to an agent's or a pool's "
                "request topic at QoS 1, never to a $share/... topic",
                ("a2a_requests.requests_go_to_request_topics",),
                ("a2a_quickstart", "a2a_pool")),
    ConformRule("A2M-RR-4, A2M-REQ-1", "Correlation Data of its own: never the Task.id, never "
                "shared by two operations in flight on one reply topic",
                ("a2a_requests.correlations_are_the_requesters_own",),
                ("a2a_quickstart", "a2a_restart", "a2a_multiturn")),
    ConformRule("A2M-CTX-4", "a request's a2a-context-id, where it sets one, is its "
                "message's contextId",
                ("a2a_requests.context_property_matches_the_payload",),
                ("a2a_quickstart", "a2a_multiturn"),
                exercised="requests_naming_their_context_twice"),
    ConformRule("A2M-DUP-1", "a reply delivered again (QoS 1, DUP) settles nothing twice",
                ("a2a_requests.nothing_settled_twice",), ("a2a_redelivered",),
                exercised="redelivered_replies"),
    ConformRule("A2M-RETRY-9", "a request's Message Expiry Interval, where it sets one, "
                "outlasts the 15 s first-reply wait",
                ("a2a_requests.request_expiry_outlasts_the_wait",), ("a2a_quickstart",),
                exercised="requests_with_an_expiry"),
    ConformRule("A2M-REQ-2", "a reply without its Correlation Data answers nothing: the "
                "request it was meant for is still retried",
                ("a2a_requests.uncorrelated_replies_answer_nothing",), ("a2a_stray_replies",),
                exercised="uncorrelated_replies"),
    ConformRule("A2M-SESS-4", "a reply topic suffix of 48 bits of chance or more, no reply "
                "topic shared", ("a2a_requests.reply_suffixes_resist_collisions",),
                ("a2a_quickstart",), exercised="reply_topics"),
    ConformRule("A2M-REQ-3", "a reply to a pooled request naming no responder answers "
                "nothing: the request is still retried",
                ("a2a_requests.unnamed_pooled_replies_answer_nothing",), ("a2a_pool_unnamed",),
                exercised="unnamed_pooled_replies"),
    ConformRule("A2M-PROP-2", "a reply carrying an a2a- User Property the profile does not "
                "define ends its operation as any reply does",
                ("a2a_requests.replies_with_unknown_properties_taken",), ("a2a_reply_extras",),
                exercised="replies_with_unknown_properties"),
    ConformRule("A2M-STREAM-2, A2M-STREAM-3", "a status that ends a correlation's stream "
                "(terminal, input-required) ends the operation at once",
                ("a2a_requests.final_statuses_end_the_operation",),
                ("a2a_quickstart", "a2a_multiturn"), exercised="operations_ended_by_a_status"),
    ConformRule("A2M-ERR-3", "a request refused -32005 is not sent again unchanged",
                ("a2a_requests.protocol_errors_not_retried_unchanged",),
                ("a2a_binding_errors",), exercised="protocol_errors"),
    ConformRule("A2M-RETRY-7", "a stream stalled past its 30 s idle wait is recovered with "
                "GetTask, not the request again",
                ("a2a_requests.stalled_streams_recovered_with_get_task",),
                ("a2a_stream_stall",), exercised="stalled_streams"),
)


def _levelled(rules: tuple[ConformRule, ...]) -> tuple[ConformRule, ...]:
    """The rules, each with its first clause's level from the profile's table."""
    return tuple(replace(r, level=clauses.BY_ID[r.ids.split(",")[0].strip()].level.value)
                 for r in rules)


RESPONDER_RULES = _levelled(_RESPONDER_RULES)
REQUESTER_RULES = _levelled(_REQUESTER_RULES)

#: what conform's CMD may play: the responder (the default) or the requester
ROLES = ("responder", "requester")
SUITES = {"responder": RESPONDER_SUITE, "requester": REQUESTER_SUITE}


def binding(role: str) -> tuple[ConformRule, ...]:
    """The rules that judge an agent in `role`."""
    return {"responder": RESPONDER_RULES, "requester": REQUESTER_RULES}[role]


#: of each role CMD may play, the table's roles whose clauses bind it
_BINDS = {"responder": (clauses.Role.RESPONDER, clauses.Role.AGENT, clauses.Role.POOL),
          "requester": (clauses.Role.REQUESTER, clauses.Role.AGENT)}
#: the profile's clause table: a clause of a role that no rule judges is a row of its own
TABLE = tuple(TableClause(c.id, c.text, c.level.value,
                          frozenset(r for r, whom in _BINDS.items() if c.role in whom),
                          c.conformance.value, c.section) for c in clauses.CLAUSES)
LEVELS = tuple(level.value for level in clauses.Level)


def unjudged(role: str) -> dict[str, str]:
    """Why no rule judges a clause of `role` that none does, where the bench knows: out of
    every scenario's reach ("never exercised: ..."), or not the role's to keep."""
    # (imported here: the CLI reads the kit for its help, and the checkers are not light)
    from bench.checks import NOT_APPLICABLE
    if role == "requester":
        return {c: f"{NOT_APPLICABLE}the profile's discovery binds the agents others call "
                   "(Discovery Publisher Behavior); a requester publishes no Agent Card — "
                   "one that is also such an agent is judged as a responder"
                for c in ("A2M-TOPIC-1", "A2M-DISC-1", "A2M-DISC-2", "A2M-PRES-1",
                          "A2M-PRES-2", "A2M-PRES-3")}
    return {"A2M-UBSP-1": "never exercised: the bench sends no request under the "
                          "untrusted-broker security profile (ubsp-v1 is not modelled)",
            "A2M-DISC-2": "never exercised: the agent contract has no way to tell an agent "
                          "to leave for good (a stop is a graceful disconnect: A2M-PRES-3)",
            "A2M-DUP-2": "never exercised: no scenario holds a delivered request in a "
                         "responder past its expiry (the broker drops expired ones: "
                         "a2a_broker judges that)"}


#: what an agent may declare it leaves out: its clauses are then not applicable to it
DECLARATIONS = (
    Declaration("core", "the agent declares core conformance only: Extended clauses "
                        "(pools, handover, ...) are not applicable",
                "declared core conformance only (--core)",
                frozenset(c.id for c in clauses.CLAUSES
                          if c.conformance is clauses.Conformance.EXTENDED),
                of_rule="; {id} is Extended"),
    # the runs that need an agent to handle bearer tokens, and the clauses only they judge
    Declaration("no-tokens", "the agent declares it handles no OAuth bearer tokens (it "
                             "neither requires nor sends them): the a2a_oauth run is "
                             "skipped and its clauses (A2M-REQ-5, -RSP-6, -RSP-7, -SESS-6) "
                             "are not applicable",
                "declared it handles no bearer tokens (--no-tokens)",
                frozenset({"A2M-REQ-5", "A2M-RSP-6", "A2M-RSP-7", "A2M-SESS-6"}),
                runs=frozenset({"a2a_oauth"})),
)

#: the broker conform runs the suites on (an MQTT 5 broker)
BROKER = "mosquitto"
#: where conform's CMD runs, as its report's first line says it
SETUPS = {"responder": "every responder of an A2A-over-MQTT pair, behind the reference "
                       "requester",
          "requester": "the requester of an A2A-over-MQTT pair, in front of the reference "
                       "responders"}
#: the document the clauses come from, and its commit (compatibility.json's `spec`)
DOCUMENT = clauses.SPEC
COMMIT = clauses.SPEC_COMMIT
#: conform --help's paragraph and example lines for it
HELP = ("--profile a2a-mqtt: CMD as every responder of an A2A-over-MQTT topology,\n"
        "the reference requester in front, on Mosquitto, through a short run of each\n"
        "situation of the profile (requests, SIGKILL and SIGTERM restarts, properties\n"
        "tampered with, malformed input, a pool, multi-turn, bearer tokens over TLS,\n"
        "a handover; each named as it runs); one row per clause of\n"
        "docs/profiles/a2a-mqtt.md that binds a responder, grouped MUST / SHOULD /\n"
        "MAY. The agent contract: docs/profiles/own-agent.md. About 5 minutes.\n"
        "--role requester: CMD as the requester instead, in front of the reference\n"
        "responders (the clauses that bind a requester; about 2 minutes).")
EXAMPLES = (
    "a2a-bench conform --profile a2a-mqtt 'python examples/a2a-responder/responder.py'",
    "a2a-bench conform --profile a2a-mqtt --level must --core ./my-agent",
    "a2a-bench conform --profile a2a-mqtt --role requester "
    "'python examples/a2a-requester/requester.py'",
    "a2a-bench conform --profile a2a-mqtt --image my-agent:1.2   (its containers)")
