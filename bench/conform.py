"""`a2a-bench conform CMD`: anyone's node judged against docs/PROTOCOL.md, rule by rule.

CMD is started as every executor of a star (the orchestrator stays the reference), on the
embedded broker, behind the wire tap, through a short run of each scenario of SUITE — the
situations the protocol's rules are about: streamed tasks, a malformed envelope, forged and
tampered signatures, QoS1 redelivery, a restart in the ledger's flush window, a request
without a replyNodeId, an emptied roster. Each protocol rule of RULES is then PASS (the
checker rules that judge it found cases, and no violation), FAIL (one of them found a
violation: the evidence is its first counterexample, naming the node), or UNKNOWN (no run
exercised it, or the node declared it leaves that part out). It is the compliance report
A2A's TCK gives for HTTP, here for MQTT.

The verdicts judge the whole mesh, the reference orchestrator included; a counterexample
names the node it is about.

`--profile a2a-mqtt` does the same for an A2A-over-MQTT responder (CMD as every responder,
the reference requester in front, on Mosquitto): one row per clause of the profile's table
(docs/profiles/a2a-mqtt.md) that binds a responder, grouped MUST / SHOULD / MAY as A2A's TCK
groups requirements; a clause no rule of the bench observes yet says so, apart from one a
rule judges that the runs never exercised, and apart from an Extended clause the agent
declares it leaves out (`--core`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.checks import NOT_APPLICABLE, NOTHING, Verdict
from bench.protocols import protocols
from bench.protocols.a2a_mqtt import clauses
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.substrates import EnvironmentFailure, Options
from bench.variants import REFERENCE

#: (scenario, seconds it is squeezed to, what it exercises)
SUITE: tuple[tuple[str, float, str], ...] = (
    ("quickstart", 5, "tasks, streams, gates, the directory, loose signatures"),
    ("hostile_input", 10, "malformed envelopes, in strict mode"),
    ("attacks", 12, "forged senders against strict admission"),
    ("tampering_v2", 12, "tampered payloads and routing under signature v2"),
    ("qos1_redelivery", 15, "QoS1 redelivery with DUP: the ledger and idempotent tasks"),
    ("restart", 12, "a SIGKILL in the ledger's flush window and a restart from the data dir"),
    ("redelivery_restart", 12, "QoS1 redelivery across a restart: what was run is not rerun"),
    ("missing_reply_node", 10, "requests without a replyNodeId"),
    ("empty_directory", 12, "a restart with an emptied roster: the default executor"),
)


@dataclass(frozen=True)
class ProtocolRule:
    ids: str            # the rule ids of docs/PROTOCOL.md
    what: str
    judged_by: tuple[str, ...]   # checker.rule
    #: the runs of the suite that put the node in the rule's situation: it PASSes only if
    #: each of them judged it (a restart rule is not passed by a run with no restart), and
    #: FAILs on a violation in any run
    where: tuple[str, ...]
    #: a count its checker keeps that must be above 0 in some run for the row to PASS: a
    #: clause that binds only when the node does something ("if set") was not exercised
    #: by a node that never did (UNKNOWN, saying so; None: every judged run exercises it)
    exercised: str | None = None
    #: runs that each put the node in the rule's situation in their own way, of which one
    #: judging it is enough (a pool that cannot form on the suite's broker is judged in
    #: another pool run): a violation in any FAILs; one that could not decide is named in
    #: the evidence of a row that PASSes on another, and leaves it UNKNOWN when none could
    one_of: tuple[str, ...] = ()
    #: the clause's RFC 2119 level where its protocol's table gives one (None: the A2A
    #: profile's table says, or a seed rule)
    level: str | None = None

    @property
    def runs(self) -> tuple[str, ...]:
        """Every run that judges the rule: `where`, then `one_of`."""
        return (*self.where, *self.one_of)


RULES: tuple[ProtocolRule, ...] = (
    ProtocolRule("W-MQTT-2, W-MQTT-3", "a persistent session and a will on the own directory topic",
                 ("wire_evidence.connects_with_its_session_and_will",
                  "qos1_delivery.session_kept_as_promised"),
                 ("quickstart", "restart")),
    ProtocolRule("W-TOP-4", "subscribes its own inbox, never another node's",
                 ("wire_evidence.subscribes_to_its_own_inbox",),
                 ("quickstart",)),
    ProtocolRule("W-MQTT-5", "every QoS1 message taken is acknowledged",
                 ("wire_evidence.acknowledges_what_it_takes",),
                 ("quickstart", "qos1_redelivery")),
    ProtocolRule("W-MQTT-6, W-LED-1..3", "a copy is dropped by type|messageId, by a durable ledger",
                 ("duplicate_execution.admitted_once", "duplicate_execution.ledger_flushed_on_time",
                  "qos1_delivery.redelivery_marked_dup"),
                 ("qos1_redelivery", "redelivery_restart")),
    ProtocolRule("W-TASK-1", "a requestId runs once, across redeliveries and restarts",
                 ("duplicate_execution.executed_once",),
                 ("qos1_redelivery", "redelivery_restart", "restart")),
    ProtocolRule("W-TASK-2, W-TASK-3", "task states in order; the watchdog",
                 ("task_lifecycle.legal_transitions", "task_lifecycle.times_out_on_time"),
                 ("quickstart",)),
    ProtocolRule("W-TASK-6", "a restart ends the tasks it interrupted",
                 ("task_lifecycle.reaches_terminal",),
                 ("restart",)),
    ProtocolRule("W-TASK-4, W-TASK-5", "a response goes to the request's replyNodeId, or nowhere",
                 ("reply_routing.response_echoes_request", "reply_routing.response_to_reply_node",
                  "reply_routing.missing_reply_node_explicit",
                  "wire_evidence.responses_return_to_the_requester"),
                 ("quickstart", "missing_reply_node")),
    ProtocolRule("W-TOP-1, W-OUT-1..3", "targeted to the inbox it names; UNDELIVERABLE, never a broadcast",
                 ("targeted_delivery.published_to_a_node", "targeted_delivery.own_messages_stay_local",
                  "targeted_delivery.consumed_by_addressee",
                  "wire_evidence.publishes_to_the_inbox_it_names",
                  "directory_liveness.undeliverable_only_when_unknown"),
                 ("quickstart",)),
    ProtocolRule("W-ROS-1, W-ROS-2, W-ROS-4", "never a mute receiver; only its own namespace",
                 ("directory_liveness.no_mute_receiver", "directory_liveness.roster_of_own_namespace",
                  "targeted_delivery.no_foreign_namespace"),
                 ("empty_directory",)),
    ProtocolRule("W-DIR-3", "announced after the SUBACK, with every executor registered",
                 ("directory_liveness.registers_all_expected",),
                 ("quickstart",)),
    ProtocolRule("W-ENV-1, W-ENV-4", "malformed input is refused with a true reason, never a crash",
                 ("robustness.hostile_input_refused", "robustness.never_raises",
                  "silent_loss.drops_are_true"),
                 ("hostile_input",)),
    ProtocolRule("W-ID-4, W-TOP-5", "publishes only to topics of the scheme",
                 ("robustness.topics_well_formed",),
                 ("quickstart", "hostile_input")),
    ProtocolRule("W-SIG-1..6, W-AUTH-1..4", "signatures and admission as an honest verifier says",
                 ("auth_admission.mode_keeps_the_matrix", "auth_admission.attack_has_an_outcome",
                  "auth_admission.verdict_is_honest",
                  "wire_evidence.refused_requests_get_no_answer"),
                 ("attacks", "tampering_v2")),
    ProtocolRule("W-REQ-2", "every request ends once, and no answer is lost unexplained",
                 ("silent_loss.settles_once", "silent_loss.no_response_explained",
                  "silent_loss.no_response_not_early"),
                 ("quickstart", "restart")),
    ProtocolRule("W-REL-1..4", "a stream's frames: its task's, seq 1..n, never repeated",
                 ("relay_integrity.frames_carry_the_flow", "relay_integrity.seqs_are_one_to_n",
                  "relay_integrity.streams_of_their_tasks_conversation",
                  "wire_evidence.frames_never_repeat_a_seq"),
                 ("quickstart",)),
    ProtocolRule("W-REL-7, W-REL-8", "the receiver: in order, once, to its conversation",
                 ("relay_integrity.delivered_in_order_once",
                  "relay_integrity.delivered_to_its_conversation"),
                 ("quickstart",)),
    ProtocolRule("§1.14 gates", "a decided gate resumes its own instance once",
                 ("gate_integrity.resumes_the_gates_instance", "gate_integrity.decided_once",
                  "gate_integrity.every_click_answered"),
                 ("quickstart",)),
    ProtocolRule("§1.14 context", "copy-on-write context: nothing leaks, failures never merged",
                 ("context_isolation.no_values_of_another_instance",
                  "context_isolation.failed_work_never_merged"),
                 ("quickstart",)),
    ProtocolRule("D§10 client ids", "one client id per node",
                 ("deployment.unique_client_ids",),
                 ("quickstart",)),
    ProtocolRule("P-OUT-1..4", "what the node reports of its traffic is what crossed its wire",
                 ("wire_evidence.reports_match_the_wire",),
                 ("quickstart", "qos1_redelivery", "restart")),
)


#: The A2A-over-MQTT profile's suite, CMD as every responder: (scenario, seconds, what)
A2A_SUITE: tuple[tuple[str, float, str], ...] = (
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
#: The runs that need an agent to handle bearer tokens, and the clauses only they judge:
#: not applicable to one that declares it handles none (--no-tokens)
TOKEN_RUNS = frozenset({"a2a_oauth"})
TOKEN_CLAUSES = frozenset({"A2M-REQ-5", "A2M-RSP-6", "A2M-RSP-7", "A2M-SESS-6"})

#: The clauses of every agent's session, judged of a responder and of a requester alike
A2A_SESSION_RULES: tuple[ProtocolRule, ...] = (
    ProtocolRule("A2M-SESS-1", "MQTT 5", ("a2a_session.connects_with_mqtt5",),
                 ("a2a_quickstart",)),
    ProtocolRule("A2M-SESS-5", "a session that outlives the connection",
                 ("a2a_session.connects_with_a_persistent_session",),
                 ("a2a_quickstart", "a2a_restart")),
    ProtocolRule("A2M-SESS-3, A2M-ID-1", "the client id is {org}/{unit}/{agent}, every id of "
                 "[A-Za-z0-9_.-]",
                 ("a2a_session.connects_as_org_unit_agent",), ("a2a_quickstart",)),
    ProtocolRule("A2M-PROP-1", "the binding's User Properties carry their a2a- prefix",
                 ("a2a_session.binding_properties_carry_the_prefix",), ("a2a_quickstart",)),
    ProtocolRule("A2M-TOPIC-2", "what it publishes and subscribes under $a2a/ is an "
                 "interaction topic $a2a/v1/{method}/{org_id}/{unit_id}/{agent_id}",
                 ("a2a_session.interaction_topics_keep_the_shape",), ("a2a_quickstart",)),
)
#: The responder's clauses each judged by rules of the bench, and the runs that put it there
A2A_RULES: tuple[ProtocolRule, ...] = (
    *A2A_SESSION_RULES,
    ProtocolRule("A2M-TOPIC-1, A2M-DISC-1, A2M-PRES-1, A2M-PRES-2",
                 "the card retained at QoS 1 on its own discovery topic, online; the Last Will "
                 "on it",
                 ("a2a_session.announces_its_card_with_a_will",), ("a2a_quickstart",)),
    ProtocolRule("A2M-RETRY-3, A2M-DUP-1",
                 "a Task.id runs once, across retries, redeliveries and restarts",
                 ("duplicate_execution.executed_once",),
                 ("a2a_quickstart", "a2a_restart", "a2a_lost_reply_restart", "a2a_redelivered")),
    ProtocolRule("A2M-RR-3, A2M-STREAM-1, A2M-ERR-1",
                 "replies and stream items on the request's Response Topic with its "
                 "Correlation Data",
                 ("a2a_replies.replies_answer_a_request",),
                 ("a2a_quickstart", "a2a_restart", "a2a_tampered")),
    ProtocolRule("A2M-RR-3", "every request it took in ends in a final answer, unless a fault "
                 "or a stop explains the loss (liveness)",
                 ("a2a_replies.every_request_answered",),
                 ("a2a_quickstart", "a2a_restart", "a2a_multiturn", "a2a_lost_reply_restart")),
    ProtocolRule("A2M-RSP-1", "subscribes its direct request topic",
                 ("a2a_session.subscribes_its_request_topic",), ("a2a_quickstart",)),
    ProtocolRule("A2M-RR-6, A2M-RR-4", "every reply of a task echoes the requester's Task.id, "
                 "never the Correlation Data",
                 ("a2a_replies.replies_echo_the_task_id",), ("a2a_quickstart", "a2a_restart")),
    ProtocolRule("A2M-STREAM-2", "nothing follows a correlation's final answer",
                 ("a2a_replies.nothing_after_the_final_answer",),
                 ("a2a_quickstart", "a2a_restart")),
    ProtocolRule("A2M-RSP-2", "a request without Correlation Data is refused, never run",
                 ("a2a_replies.refused_requests_run_nothing",), ("a2a_tampered",)),
    ProtocolRule("A2M-RSP-3, A2M-RSP-4, A2M-CTX-4, A2M-ERR-2",
                 "a malformed request gets the error the profile names and runs nothing",
                 ("a2a_replies.malformed_requests_refused",),
                 ("a2a_malformed", "a2a_bad_input", "a2a_bad_types", "a2a_bad_values",
                  "a2a_bad_properties")),
    ProtocolRule("A2M-PROP-2", "a request carrying an a2a- User Property the profile does not "
                 "define is served as if it were not there",
                 ("a2a_replies.unknown_properties_ignored",), ("a2a_bad_properties",)),
    ProtocolRule("A2M-BIN-1", "a request asking for an artifact mode nobody supports is "
                 "answered in JSON", ("a2a_replies.unknown_artifact_modes_answered_in_json",),
                 ("a2a_bad_properties",)),
    ProtocolRule("A2M-BASE-1", "a task ends as its agent did: COMPLETED when it succeeded, "
                 "INPUT_REQUIRED when it asked, FAILED when it failed",
                 ("a2a_replies.tasks_end_as_their_agent_did",),
                 ("a2a_quickstart", "a2a_multiturn")),
    ProtocolRule("A2M-RSP-5", "a reply to a pooled request names its responder",
                 ("a2a_pools.pooled_replies_name_their_responder",), ("a2a_pool",)),
    ProtocolRule("A2M-PRES-3", "leaving on purpose, its card offline before the DISCONNECT",
                 ("a2a_session.leaves_offline",), ("a2a_quickstart", "a2a_graceful_restart")),
    ProtocolRule("A2M-CTX-1, A2M-CTX-3",
                 "a task keeps its context; a request naming another is refused (-32602)",
                 ("a2a_replies.contexts_are_kept",), ("a2a_multiturn", "a2a_malformed")),
    ProtocolRule("A2M-RETRY-3", "a task that ended stays ended; a task it said it has is "
                 "never denied (retries, GetTask, CancelTask)",
                 ("a2a_replies.ended_tasks_stay_ended", "a2a_replies.known_tasks_stay_known"),
                 ("a2a_multiturn", "a2a_restart", "a2a_lost_reply_restart")),
    ProtocolRule("A2M-RSP-7", "a request whose bearer token is missing, expired, for another "
                 "audience or issuer, forged or short of the scope is refused, and runs "
                 "nothing; one whose token is good is not refused",
                 ("a2a_oauth.unauthorized_requests_refused", "a2a_oauth.good_tokens_honoured"),
                 ("a2a_oauth",)),
    ProtocolRule("A2M-RSP-6", "no bearer token echoed in a reply's payload or properties",
                 ("a2a_session.tokens_never_echoed",), ("a2a_oauth",)),
    ProtocolRule("A2M-SESS-6", "a connection that carries bearer tokens came by TLS",
                 ("a2a_session.tokens_travel_over_tls",), ("a2a_oauth",)),
    ProtocolRule("A2M-CTX-2", "a request naming a context it does not know opens it, with no "
                 "error", ("a2a_replies.new_contexts_are_welcome",),
                 ("a2a_quickstart", "a2a_multiturn"), exercised="contexts_opened"),
    ProtocolRule("A2M-POOL-1", "the members of a pool share one group_id",
                 ("a2a_pools.pool_members_share_a_group",), ("a2a_pool",),
                 exercised="pool_subscriptions"),
    ProtocolRule("A2M-HAND-1", "a task handed over: what the card owner sends on reaches its "
                 "delegate with its reply path, and every reply of the delegate names it",
                 ("a2a_handover.handed_over_replies_name_their_agent",
                  "a2a_handover.handed_over_requests_reach_their_agent"), ("a2a_handover",)),
)

#: A requester's suite: CMD as the requester in front of the reference responders
A2A_REQUESTER_SUITE: tuple[tuple[str, float, str], ...] = (
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
A2A_REQUESTER_RULES: tuple[ProtocolRule, ...] = (
    *A2A_SESSION_RULES,
    ProtocolRule("A2M-RR-2, A2M-RR-5, A2M-SESS-2",
                 "Response Topic subscribed first, Correlation Data, a UUIDv4 Task.id",
                 ("a2a_requests.requests_carry_a_reply_path",),
                 ("a2a_quickstart", "a2a_restart", "a2a_multiturn")),
    ProtocolRule("A2M-RETRY-2, A2M-RETRY-4, A2M-RETRY-6",
                 "new Correlation Data per attempt; nothing sent again once a reply came",
                 ("a2a_requests.no_request_again_after_a_reply",),
                 ("a2a_restart", "a2a_reply_in_backoff", "a2a_multiturn")),
    ProtocolRule("A2M-RETRY-5, A2M-RETRY-4", "every operation it took on ends — an answer, an "
                 "error, or its give-up after its attempts — within the profile's budget "
                 "(liveness)", ("a2a_requests.every_operation_settles",),
                 ("a2a_quickstart", "a2a_restart", "a2a_multiturn", "a2a_stream_stall")),
    ProtocolRule("A2M-RETRY-1, A2M-RETRY-5", "a retry only after the profile's default waits "
                 "(15 s, then backoff 1 s, 2 s ±20 %), at most three attempts",
                 ("a2a_requests.retries_keep_the_profile",),
                 ("a2a_restart", "a2a_reply_in_backoff")),
    ProtocolRule("A2M-CTX-5, A2M-RR-7", "a task sent again keeps its Task.id and context",
                 ("a2a_requests.turns_keep_the_task_and_context",), ("a2a_multiturn",)),
    ProtocolRule("A2M-REQ-5", "every request to a responder requiring them carries a bearer "
                 "token", ("a2a_oauth.requests_carry_a_token",), ("a2a_oauth",)),
    ProtocolRule("A2M-REQ-4, A2M-HAND-2, A2M-RETRY-8", "follow-ups go to the agent a reply "
                 "named; a pooled request is retried to its pool until then",
                 ("a2a_requests.follow_ups_go_to_the_named_agent",), ("a2a_handover",),
                 # a shared pool does not form on Mosquitto 2.0.11 ($share on a $ topic):
                 # there a pool of one that subscribes its pool's topic itself judges it
                 one_of=("a2a_pool", "a2a_pool_unnamed")),
    ProtocolRule("A2M-SESS-6", "a connection that carries bearer tokens came by TLS",
                 ("a2a_session.tokens_travel_over_tls",), ("a2a_oauth",)),
    ProtocolRule("A2M-RR-1, A2M-TOPIC-2, A2M-TOPIC-3", "requests go to an agent's or a pool's "
                 "request topic at QoS 1, never to a $share/... topic",
                 ("a2a_requests.requests_go_to_request_topics",),
                 ("a2a_quickstart", "a2a_pool")),
    ProtocolRule("A2M-RR-4, A2M-REQ-1", "Correlation Data of its own: never the Task.id, never "
                 "shared by two operations in flight on one reply topic",
                 ("a2a_requests.correlations_are_the_requesters_own",),
                 ("a2a_quickstart", "a2a_restart", "a2a_multiturn")),
    ProtocolRule("A2M-CTX-4", "a request's a2a-context-id, where it sets one, is its "
                 "message's contextId",
                 ("a2a_requests.context_property_matches_the_payload",),
                 ("a2a_quickstart", "a2a_multiturn"),
                 exercised="requests_naming_their_context_twice"),
    ProtocolRule("A2M-DUP-1", "a reply delivered again (QoS 1, DUP) settles nothing twice",
                 ("a2a_requests.nothing_settled_twice",), ("a2a_redelivered",),
                 exercised="redelivered_replies"),
    ProtocolRule("A2M-RETRY-9", "a request's Message Expiry Interval, where it sets one, "
                 "outlasts the 15 s first-reply wait",
                 ("a2a_requests.request_expiry_outlasts_the_wait",), ("a2a_quickstart",),
                 exercised="requests_with_an_expiry"),
    ProtocolRule("A2M-REQ-2", "a reply without its Correlation Data answers nothing: the "
                 "request it was meant for is still retried",
                 ("a2a_requests.uncorrelated_replies_answer_nothing",), ("a2a_stray_replies",),
                 exercised="uncorrelated_replies"),
    ProtocolRule("A2M-SESS-4", "a reply topic suffix of 48 bits of chance or more, no reply "
                 "topic shared", ("a2a_requests.reply_suffixes_resist_collisions",),
                 ("a2a_quickstart",), exercised="reply_topics"),
    ProtocolRule("A2M-REQ-3", "a reply to a pooled request naming no responder answers "
                 "nothing: the request is still retried",
                 ("a2a_requests.unnamed_pooled_replies_answer_nothing",), ("a2a_pool_unnamed",),
                 exercised="unnamed_pooled_replies"),
    ProtocolRule("A2M-PROP-2", "a reply carrying an a2a- User Property the profile does not "
                 "define ends its operation as any reply does",
                 ("a2a_requests.replies_with_unknown_properties_taken",), ("a2a_reply_extras",),
                 exercised="replies_with_unknown_properties"),
    ProtocolRule("A2M-STREAM-2, A2M-STREAM-3", "a status that ends a correlation's stream "
                 "(terminal, input-required) ends the operation at once",
                 ("a2a_requests.final_statuses_end_the_operation",),
                 ("a2a_quickstart", "a2a_multiturn"), exercised="operations_ended_by_a_status"),
    ProtocolRule("A2M-ERR-3", "a request refused -32005 is not sent again unchanged",
                 ("a2a_requests.protocol_errors_not_retried_unchanged",),
                 ("a2a_binding_errors",), exercised="protocol_errors"),
    ProtocolRule("A2M-RETRY-7", "a stream stalled past its 30 s idle wait is recovered with "
                 "GetTask, not the request again",
                 ("a2a_requests.stalled_streams_recovered_with_get_task",),
                 ("a2a_stream_stall",), exercised="stalled_streams"),
)


@dataclass(frozen=True)
class Profile:
    """What conform holds a command to: the seed protocol's rules (CMD as its executors) or
    the A2A-over-MQTT profile's (CMD as its responders)."""

    name: str
    role: str                 # the topology role CMD plays
    suite: tuple[tuple[str, float, str], ...]
    rules: tuple[ProtocolRule, ...]
    broker: str               # the embedded broker it runs on by default
    #: whom a clause binds that CMD must keep (the profile's clause table; none: the seed's)
    binds: tuple[clauses.Role, ...] = ()
    #: clauses of those roles no rule judges, each with why: not the role's to keep
    #: ("not applicable: ...") or out of every scenario's reach ("never exercised: ...")
    unjudged: tuple[tuple[str, str], ...] = ()
    #: where CMD runs, as the report's first line says it
    setup: str = ""
    #: the document its clauses come from (compatibility.json's `spec`)
    document: str = "docs/PROTOCOL.md"


PROFILES = {p.name: p for p in (
    Profile("seed", "executor", SUITE, RULES, "amqtt"),
    Profile("a2a-mqtt", "responder", A2A_SUITE, A2A_RULES, "mosquitto",
            (clauses.Role.RESPONDER, clauses.Role.AGENT, clauses.Role.POOL), (
                ("A2M-UBSP-1", "never exercised: the bench sends no request under the "
                               "untrusted-broker security profile (ubsp-v1 is not modelled)"),
                ("A2M-DISC-2", "never exercised: the agent contract has no way to tell an "
                               "agent to leave for good (a stop is a graceful disconnect: "
                               "A2M-PRES-3)"),
                ("A2M-DUP-2", "never exercised: no scenario holds a delivered request in a "
                              "responder past its expiry (the broker drops expired ones: "
                              "a2a_broker judges that)"))),
    Profile("a2a-mqtt/requester", "requester", A2A_REQUESTER_SUITE, A2A_REQUESTER_RULES,
            "mosquitto", (clauses.Role.REQUESTER, clauses.Role.AGENT),
            tuple((c, f"{NOT_APPLICABLE}the profile's discovery binds the agents others call "
                      "(Discovery Publisher Behavior); a requester publishes no Agent Card — "
                      "one that is also such an agent is judged as a responder")
                  for c in ("A2M-TOPIC-1", "A2M-DISC-1", "A2M-DISC-2", "A2M-PRES-1",
                            "A2M-PRES-2", "A2M-PRES-3"))),
)}


def _kits() -> dict[str, Profile]:
    """The conform kit of every protocol that has one (`ProtocolSpec.conform`): one profile
    per role it names, `name` for its first, `name/role` for the others."""
    out: dict[str, Profile] = {}
    for spec in protocols().values():
        kit = spec.module("conform")
        if kit is None:
            continue
        for i, role in enumerate(kit.ROLES):
            rules = tuple(ProtocolRule(c.id, c.text, c.judged_by, c.where, c.exercised,
                                       level=c.level) for c in kit.binding(role))
            out[spec.name if i == 0 else f"{spec.name}/{role}"] = Profile(
                spec.name, role, kit.SUITE, rules, kit.BROKER,
                setup=kit.SETUP.format(role=role), document=kit.DOCUMENT)
    return out


PROFILES |= _kits()


@dataclass
class Row:
    rule: ProtocolRule
    status: str          # PASS FAIL UNKNOWN
    evidence: str
    #: the run of the suite the status comes from: where it failed first, else the first
    #: run that judges it (None: no run of the suite judges it)
    scenario: str | None = None

    @property
    def declared_out(self) -> bool:
        """UNKNOWN only because the node declares it leaves that part out."""
        return self.status == "UNKNOWN" and NOT_APPLICABLE in self.evidence

    @property
    def level(self) -> str | None:
        """The RFC 2119 level of the profile clause the row is about (None: a seed rule)."""
        if self.rule.level is not None:
            return self.rule.level
        first = self.rule.ids.split(",")[0].strip()
        return clauses.BY_ID[first].level.value if first in clauses.BY_ID else None

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule.ids, "what": self.rule.what, "status": self.status,
                "evidence": self.evidence, "judgedBy": list(self.rule.judged_by),
                **({"level": self.level} if self.level else {}),
                **({"scenario": self.scenario} if self.scenario else {})}


def _vacuous(v: Verdict) -> bool:
    return v.note.startswith((NOTHING, NOT_APPLICABLE))


#: (run, counterexample) -> whether the case is about the implementation judged (None:
#: every case is: its counterpart is the reference, which the suite holds to every rule)
Owns = Callable[[str, dict[str, Any]], bool]


def judge_rules(runs: dict[str, list[Verdict]],
                rules: tuple[ProtocolRule, ...] = RULES, owns: Owns | None = None) -> list[Row]:
    """One row per protocol rule, from the verdicts of the runs of the suite: FAIL on a
    violation of one of its checker rules in any run; PASS when every run of its `where`,
    and one of its `one_of` if it has any, judged it without one (the `one_of` runs that
    could not decide named); else UNKNOWN, saying which run did not. Given `owns`, only a
    violation whose counterexample is about the implementation judged FAILs its row; one
    about its counterpart leaves the row UNKNOWN, naming it."""
    rows = []
    for rule in rules:
        failed: list[tuple[str, str]] = []       # (run, evidence)
        missing: list[tuple[str, str]] = []
        judged: list[str] = []
        undecided: list[tuple[str, str]] = []    # runs of one_of that could not decide
        for scenario, verdicts in runs.items():
            outcome = _judged(rule, scenario, verdicts, owns)
            if outcome.startswith("FAIL "):
                failed.append((scenario, outcome[5:]))
            elif outcome.startswith(ELSEWHERE):
                missing.append((scenario, outcome))
            elif scenario in rule.where and outcome != "PASS":
                missing.append((scenario, outcome))
            elif scenario in rule.one_of and outcome != "PASS":
                undecided.append((scenario, outcome))
            elif scenario in rule.runs:
                judged.append(scenario)
        missing += [(s, f"{s}: not run") for s in rule.where if s not in runs]
        undecided += [(s, f"{s}: not run") for s in rule.one_of if s not in runs]
        if rule.one_of and not set(judged) & set(rule.one_of):
            missing += undecided      # none of them judged it
        never = rule.exercised is not None and not any(
            v.counts.get(rule.exercised, 0) > 0
            for s in rule.runs for v in runs.get(s, ()) if s in runs)
        if failed:
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            rows.append(Row(rule, "FAIL", failed[0][1] + more, failed[0][0]))
        elif never and not missing:
            rows.append(Row(rule, "UNKNOWN", f"never exercised: no run of {', '.join(rule.runs)}"
                                             f" counted any {rule.exercised.replace('_', ' ')}",
                            rule.runs[0]))
        elif missing:
            rows.append(Row(rule, "UNKNOWN", missing[0][1], missing[0][0]))
        else:
            undecided = [u for u in undecided if u not in missing]
            rows.append(Row(rule, "PASS", "judged in " + ", ".join(judged or rule.runs)
                            + "".join(f"; not in {why}" for _s, why in undecided),
                            (judged or rule.runs or (None,))[0]))
    return rows


#: how a row's evidence begins when the run's violations of it were its counterpart's
ELSEWHERE = "not this implementation's: "


def _judged(rule: ProtocolRule, scenario: str, verdicts: list[Verdict],
            owns: Owns | None = None) -> str:
    """PASS, "FAIL <evidence>", or why the run did not judge the rule."""
    by_name = {v.name: v for v in verdicts}
    why_not = f"{scenario}: no checker rule of it judged anything"
    judged = False
    for ref in rule.judged_by:
        checker, rule_id = ref.split(".")
        v = by_name.get(checker)
        if v is None or rule_id not in v.rules:
            continue
        counts = v.rules[rule_id]
        if counts["violations"]:
            cases = [c for c in v.counterexamples if c["rule"] == rule_id]
            case = next((c for c in cases if owns is None or owns(scenario, c)), None)
            if case is None and cases:
                return f"{ELSEWHERE}{scenario}: {ref}: {cases[0]['why']}"
            return f"FAIL {scenario}: {ref}: {case['why'] if case else 'violated'}"
        if _vacuous(v):
            why_not = f"{scenario}: {v.note.splitlines()[0]}"
        elif counts["unknown"]:
            why_not = f"{scenario}: {ref} could not decide {counts['unknown']} case(s)"
        else:
            judged = True
    return "PASS" if judged else why_not


NO_TOKENS = f"{NOT_APPLICABLE}declared it handles no bearer tokens (--no-tokens)"


def clause_rows(rows: list[Row], core_only: bool = False,
                binds: tuple[clauses.Role, ...] = PROFILES["a2a-mqtt"].binds,
                no_tokens: bool = False, unjudged: tuple[tuple[str, str], ...] = ()
                ) -> list[Row]:
    """The profile's report: its judged rows, then one row per clause binding the role
    (`binds`) that no rule of the bench judges yet; an Extended clause not applicable when
    the agent declares core conformance only, a bearer-token clause when it declares it
    handles none; in the table's order of levels."""
    judged = {i.strip() for r in rows for i in r.rule.ids.split(",")}
    out = []
    for r in rows:
        first = clauses.BY_ID[r.rule.ids.split(",")[0].strip()]
        if core_only and first.conformance is clauses.Conformance.EXTENDED:
            r = Row(r.rule, "UNKNOWN", f"{NOT_APPLICABLE}declared core conformance only "
                                       f"(--core); {first.id} is Extended", r.scenario)
        elif no_tokens and first.id in TOKEN_CLAUSES:
            r = Row(r.rule, "UNKNOWN", NO_TOKENS, r.scenario)
        out.append(r)
    for c in clauses.CLAUSES:
        if c.id in judged or c.role not in binds:
            continue
        why = f"{NOT_APPLICABLE}declared core conformance only (--core)" \
            if core_only and c.conformance is clauses.Conformance.EXTENDED \
            else NO_TOKENS if no_tokens and c.id in TOKEN_CLAUSES \
            else dict(unjudged).get(c.id, "not judged: no rule of the bench observes it yet")
        out.append(Row(ProtocolRule(c.id, c.text, (), ()), "UNKNOWN", why))
    order = list(clauses.Level)
    return sorted(out, key=lambda r: order.index(clauses.Level(r.level or "MUST")))


def conform(command: tuple[str, ...], out: Path, broker: str | None = None,
            say: Callable[[str], None] = print,
            suite: tuple[tuple[str, float, str], ...] | None = None,
            profile: str = "seed", core_only: bool = False,
            no_tokens: bool = False, only: tuple[str, ...] = (),
            image: str | None = None) -> list[Row]:
    """Run the profile's suite with `command` in its role — or, given `image`, a container
    of that image (--mode docker: its entrypoint speaks the node-process protocol, as
    docs/PROTOCOL.md says); the rows of the report. An agent that declares it handles no
    bearer tokens (`no_tokens`) skips the runs that need them; `only` names the runs to
    make (a row's replay: one run of the suite, again)."""
    p = PROFILES[profile]
    broker = broker or p.broker
    suite = tuple(s for s in suite or p.suite if not (no_tokens and s[0] in TOKEN_RUNS)
                  and (not only or s[0] in only))
    runs = run_suite(suite, out, broker, say, **(
        {"images": {p.role: image}} if image else {"commands": {p.role: command}}))
    rows = judge_rules(runs, p.rules)
    if p.binds:
        rows = clause_rows(rows, core_only, p.binds, no_tokens, p.unjudged)
    (out / "conform.json").write_text(json.dumps(
        {"command": list(command), **({"image": image} if image else {}),
         "profile": profile, "broker": broker,
         "suite": [s for s, _t, _w in suite],
         "seeds": {s: load_scenario(SCENARIOS / f"{s}.toml").seed for s, _t, _w in suite},
         "rules": [r.to_json() for r in rows]}, indent=2) + "\n")
    return rows


def run_suite(suite: tuple[tuple[str, float, str], ...], out: Path, broker: str,
              say: Callable[[str], None] = print,
              commands: dict[str, tuple[str, ...]] | None = None,
              images: dict[str, str] | None = None,
              tap_all: bool = False) -> dict[str, list[Verdict]]:
    """Each run of `suite` into out/<run>, the nodes of each role of `commands` started by
    its command, of each role of `images` containers of its image (--mode docker), the
    rest the reference (behind the wire tap too with `tap_all`: judged from its wire as
    anyone's); each run's verdicts ([] for a run that never came up)."""
    runs: dict[str, list[Verdict]] = {}
    for name, seconds, what in suite:
        scenario = load_scenario(SCENARIOS / f"{name}.toml").squeezed(seconds)
        for role, command in (commands or {}).items():
            scenario = scenario.with_node_command(role, command)
        for role, image in (images or {}).items():
            scenario = scenario.with_node_image(role, image)
        t0 = time.perf_counter()
        try:
            result = run_scenario(scenario, REFERENCE, out / name,
                                  mode="docker" if images else "live",
                                  options=Options(broker=broker, echo_node_stderr=False,
                                                  wire_tap=tap_all))
        except EnvironmentFailure as exc:   # it never came up: this run judges nothing
            runs[name] = []
            say(f"  {name:<24} {time.perf_counter() - t0:5.1f} s  {what}  NOT RUN: {exc}")
        else:
            runs[name] = result.verdicts
            off = [v.name for v in result.verdicts if v.value.value == "false"]
            say(f"  {name:<24} {time.perf_counter() - t0:5.1f} s  {what}"
                + (f"  FALSE: {', '.join(off)}" if off else ""))
        # what the implementation wrote on stderr (its warnings, its tracebacks) is its own:
        # kept in the run's logs/, and pointed at here in one line
        logs = sorted((out / name / "logs").glob("*.log"))
        if logs:
            lines = sum(len(p.read_text(errors="replace").splitlines()) for p in logs)
            say(f"  {'':<24}          stderr: {lines} line{'s' if lines != 1 else ''} in "
                f"{out / name / 'logs'}/ ({', '.join(p.stem for p in logs)})")
    return runs


def render(rows: list[Row], width: int = 100) -> str:
    w = max([26, *(len(r.rule.ids) + 1 for r in rows)])
    lines = [f"{'rule':<{w}} {'status':<8} evidence"]
    level = None
    for r in rows:
        if r.level is not None and r.level != level:
            level = r.level
            lines.append(f"-- {level}")
        evidence = r.evidence if len(r.evidence) <= width else r.evidence[:width - 1] + "…"
        lines.append(f"{r.rule.ids:<{w}} {r.status:<8} {r.rule.what}")
        lines.append(f"{'':<{w}} {'':<8} {evidence}")
    counts = {s: sum(r.status == s for r in rows) for s in ("PASS", "FAIL", "UNKNOWN")}
    lines.append(f"{counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['UNKNOWN']} UNKNOWN "
                 f"of {len(rows)} rules")
    return "\n".join(lines)
