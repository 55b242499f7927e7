"""The seed protocol's conform kit (bench/protocols/__init__.py, `ProtocolSpec.conform`):
CMD as every executor of a star, the reference orchestrator beside it, through a short run
of each situation docs/PROTOCOL.md's rules are about; one row per rule, judged by the
seed's checkers. Plain data: conform (bench/conform.py) runs and judges it."""

from __future__ import annotations

from bench.protocols import ConformRule

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


RULES: tuple[ConformRule, ...] = (
    ConformRule("W-MQTT-2, W-MQTT-3", "a persistent session and a will on the own directory topic",
                ("wire_evidence.connects_with_its_session_and_will",
                 "qos1_delivery.session_kept_as_promised"),
                ("quickstart", "restart")),
    ConformRule("W-TOP-4", "subscribes its own inbox, never another node's",
                ("wire_evidence.subscribes_to_its_own_inbox",),
                ("quickstart",)),
    ConformRule("W-MQTT-5", "every QoS1 message taken is acknowledged",
                ("wire_evidence.acknowledges_what_it_takes",),
                ("quickstart", "qos1_redelivery")),
    ConformRule("W-MQTT-6, W-LED-1..3", "a copy is dropped by type|messageId, by a durable ledger",
                ("duplicate_execution.admitted_once", "duplicate_execution.ledger_flushed_on_time",
                 "qos1_delivery.redelivery_marked_dup"),
                ("qos1_redelivery", "redelivery_restart")),
    ConformRule("W-TASK-1", "a requestId runs once, across redeliveries and restarts",
                ("duplicate_execution.executed_once",),
                ("qos1_redelivery", "redelivery_restart", "restart")),
    ConformRule("W-TASK-2, W-TASK-3", "task states in order; the watchdog",
                ("task_lifecycle.legal_transitions", "task_lifecycle.times_out_on_time"),
                ("quickstart",)),
    ConformRule("W-TASK-6", "a restart ends the tasks it interrupted",
                ("task_lifecycle.reaches_terminal",),
                ("restart",)),
    ConformRule("W-TASK-4, W-TASK-5", "a response goes to the request's replyNodeId, or nowhere",
                ("reply_routing.response_echoes_request", "reply_routing.response_to_reply_node",
                 "reply_routing.missing_reply_node_explicit",
                 "wire_evidence.responses_return_to_the_requester"),
                ("quickstart", "missing_reply_node")),
    ConformRule("W-TOP-1, W-OUT-1..3", "targeted to the inbox it names; UNDELIVERABLE, never a broadcast",
                ("targeted_delivery.published_to_a_node", "targeted_delivery.own_messages_stay_local",
                 "targeted_delivery.consumed_by_addressee",
                 "wire_evidence.publishes_to_the_inbox_it_names",
                 "directory_liveness.undeliverable_only_when_unknown"),
                ("quickstart",)),
    ConformRule("W-ROS-1, W-ROS-2, W-ROS-4", "never a mute receiver; only its own namespace",
                ("directory_liveness.no_mute_receiver", "directory_liveness.roster_of_own_namespace",
                 "targeted_delivery.no_foreign_namespace"),
                ("empty_directory",)),
    ConformRule("W-DIR-3", "announced after the SUBACK, with every executor registered",
                ("directory_liveness.registers_all_expected",),
                ("quickstart",)),
    ConformRule("W-ENV-1, W-ENV-4", "malformed input is refused with a true reason, never a crash",
                ("robustness.hostile_input_refused", "robustness.never_raises",
                 "silent_loss.drops_are_true"),
                ("hostile_input",)),
    ConformRule("W-ID-4, W-TOP-5", "publishes only to topics of the scheme",
                ("robustness.topics_well_formed",),
                ("quickstart", "hostile_input")),
    ConformRule("W-SIG-1..6, W-AUTH-1..4", "signatures and admission as an honest verifier says",
                ("auth_admission.mode_keeps_the_matrix", "auth_admission.attack_has_an_outcome",
                 "auth_admission.verdict_is_honest",
                 "wire_evidence.refused_requests_get_no_answer"),
                ("attacks", "tampering_v2")),
    ConformRule("W-REQ-2", "every request ends once, and no answer is lost unexplained",
                ("silent_loss.settles_once", "silent_loss.no_response_explained",
                 "silent_loss.no_response_not_early"),
                ("quickstart", "restart")),
    ConformRule("W-REL-1..4", "a stream's frames: its task's, seq 1..n, never repeated",
                ("relay_integrity.frames_carry_the_flow", "relay_integrity.seqs_are_one_to_n",
                 "relay_integrity.streams_of_their_tasks_conversation",
                 "wire_evidence.frames_never_repeat_a_seq"),
                ("quickstart",)),
    ConformRule("W-REL-7, W-REL-8", "the receiver: in order, once, to its conversation",
                ("relay_integrity.delivered_in_order_once",
                 "relay_integrity.delivered_to_its_conversation"),
                ("quickstart",)),
    ConformRule("§1.14 gates", "a decided gate resumes its own instance once",
                ("gate_integrity.resumes_the_gates_instance", "gate_integrity.decided_once",
                 "gate_integrity.every_click_answered"),
                ("quickstart",)),
    ConformRule("§1.14 context", "copy-on-write context: nothing leaks, failures never merged",
                ("context_isolation.no_values_of_another_instance",
                 "context_isolation.failed_work_never_merged"),
                ("quickstart",)),
    ConformRule("D§10 client ids", "one client id per node",
                ("deployment.unique_client_ids",),
                ("quickstart",)),
    ConformRule("P-OUT-1..4", "what the node reports of its traffic is what crossed its wire",
                ("wire_evidence.reports_match_the_wire",),
                ("quickstart", "qos1_redelivery", "restart")),
)

#: what conform's CMD may play
ROLES = ("executor",)


def binding(role: str) -> tuple[ConformRule, ...]:
    """The rules an executor is judged by (it has no other role)."""
    return RULES


#: the embedded broker conform runs the suite on by default
BROKER = "amqtt"
#: where conform's CMD runs, as its report's first line says it
SETUP = "every {role} of a star, beside the reference orchestrator"
#: the document the rules come from (compatibility.json's `spec`)
DOCUMENT = "docs/PROTOCOL.md"
#: conform --help's paragraph and example lines for it
HELP = ("Start CMD as every executor of a star beside the reference orchestrator,\n"
        "on the embedded broker and behind the wire tap, through a short run of each\n"
        "situation the protocol's rules are about (streamed tasks, malformed and\n"
        "forged input, QoS1 redelivery, a restart, a missing replyNodeId, an emptied\n"
        "roster), then print each rule of docs/PROTOCOL.md as PASS, FAIL or UNKNOWN\n"
        "with its evidence. About 2 minutes.")
EXAMPLES = ("a2a-bench conform ./my-node",
            "a2a-bench conform './my-node --verbose'   (one argument: quote it)")
