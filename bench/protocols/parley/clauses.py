"""Parley v1's clause table: what the bench holds `parley-mqtt` 1.0.1 to, and where each
clause comes from.

Parley's normative spec (`docs/protocol.md` in its repository) could not be read where
this table was written: no copy of the repository is reachable, and the PyPI package
carries the README and the modules only. So the table holds exactly two kinds of text:

- the README's promises, quoted (`source = "README"`);
- the rules the library's modules cite by their spec ids (§3, §4, §4.2, §5, §8, C1-C8,
  H1-H8) with the one-line statement the module gives each (`source` names the module).

No clause is derived from what the code happens to do. Where the README itself names a
residual case (§9: "at most once per handler process lifetime, for as long as the handler
retains dedup/tombstone state"), the clause says so, and a run that shows it is reported
as declared, not as a finding. Every clause binds MUST: the rules are the spec's own
binding steps and the README's promises are promises; the bench cannot see the spec's
RFC 2119 words, and says so rather than guessing a SHOULD.

`conform --protocol parley` runs SUITE with CMD as every handler (or, `--role commander`,
every commander) and prints one row per clause of its role.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Clause:
    id: str                     # the spec's id as the source cites it, or README-n
    role: str                   # "commander", "handler" or "both"
    source: str                 # README, or the module that cites it
    text: str                   # the source's words (quoted, or the module's one line)
    judged_by: tuple[str, ...]  # checker.rule
    where: tuple[str, ...]      # the runs of SUITE that put the library in the situation
    #: a count its rules keep that some run must show above 0 for the clause to PASS
    exercised: str | None = None
    level: str = "MUST"


#: (scenario, seconds it runs, what it exercises): the shipped Parley scenarios at their
#: own length (their timing is the protocol's, which a squeeze would not shorten)
SUITE: tuple[tuple[str, float, str], ...] = (
    ("parley_quickstart", 15, "commands run and answered, no fault"),
    ("parley_restart", 45, "the handler SIGKILLed for 20 s with commands running"),
    ("parley_redelivery", 30, "a third of every node's deliveries again, 1 to 8 s later"),
    ("parley_duplicate_publish", 20, "every delivery to the handler twice"),
    ("parley_partition", 35, "the handler cut off for 12 s"),
    ("parley_pause", 30, "the handler frozen for 10 s"),
    ("parley_cancel", 30, "cancels of running and queued commands; hung agents"),
    ("parley_qos0", 45, "QoS 0: loss, a partition, a broker restart without persistence"),
    ("parley_late_redelivery", 50, "requests delivered again after the tombstone's life"),
    ("parley_broker_restart", 30, "the broker down 3 s: paho reconnects, the library resubscribes"),
    ("parley_loss", 35, "20 % packet loss on both links, then 500 ms of latency"),
    ("parley_duplicate_client_id", 30, "another client under the handler's client id for 8 s"),
)

_ALL = tuple(name for name, _s, _w in SUITE)
_FAULTED = ("parley_restart", "parley_redelivery", "parley_duplicate_publish",
            "parley_partition", "parley_pause", "parley_qos0", "parley_broker_restart",
            "parley_loss", "parley_duplicate_client_id")

CLAUSES: tuple[Clause, ...] = (
    Clause("README-1", "handler", "README",
           "\"At-most-once execution, correct even at QoS 0 ... duplicates are recognized and "
           "dropped on both sides\"",
           ("parley_handler.executed_at_most_once",), ("parley_quickstart", *_FAULTED),
           exercised="requests_again_while_running"),
    Clause("§9", "handler", "README",
           "declared residual: \"at most once per handler process lifetime, for as long as "
           "the handler retains dedup/tombstone state for that command id\" — a command run "
           "again once its state is gone is reported as declared, never as a finding",
           ("parley_handler.executed_at_most_once",), ("parley_late_redelivery",),
           exercised="declared_residual_state_expired"),
    Clause("C1", "commander", "config.py, README",
           "request_retry_interval: \"req re-publish interval while SENDING\"; README: "
           "\"Requests are re-sent until the other side shows a sign of life\"",
           ("parley_commander.requests_resent_until_a_sign_of_life",),
           ("parley_restart", "parley_partition"), exercised="requests_resent"),
    Clause("C2", "commander", "commander.py",
           "\"first sign of life — enter LIVE, stop req retries, start the execution cap\"",
           ("parley_commander.no_request_after_a_sign_of_life",), _ALL),
    Clause("C3", "commander", "config.py, README",
           "no_ack_timeout, stale_timeout, execution_timeout; README: \"Three distinct "
           "liveness outcomes. Nobody answered ($noAck), it accepted and then went silent "
           "($executionStale) and it ran too long ($executionTimeout) are separate results\"",
           ("parley_commander.liveness_outcomes_are_earned",),
           ("parley_restart", "parley_cancel"), exercised="executionStale"),
    Clause("C4, C5", "commander", "commander.py",
           "\"rak every terminal error res except $busy\"; \"a res for a tombstoned id "
           "re-emits rak (unless $busy) and discards the content\"",
           ("parley_commander.results_acknowledged",
            "parley_commander.one_outcome_per_command"), _ALL),
    Clause("C7", "commander", "config.py, README",
           "cancel_retry_interval: \"cnl re-publish interval while cancelling\"; README: "
           "\"cancelling puts a real cancel on the wire, not a local give-up\"",
           ("parley_commander.cancels_go_on_the_wire",), ("parley_cancel",),
           exercised="cancelled"),
    Clause("§5", "commander", "errors.py, README",
           "\"The single terminal outcome a commander observes for a command\"; README: "
           "\"receive one typed result: success or a clear error\"",
           ("parley_commander.every_command_settles",
            "parley_commander.one_outcome_per_command"), _ALL),
    Clause("H2", "handler", "handler.py",
           "\"unknown id — admit if a command slot is free, otherwise stateless $busy\"; "
           "\"the first hb is the accept-ack\"",
           ("parley_handler.requests_answered",), _ALL),
    Clause("H3", "handler", "config.py, handler.py",
           "heartbeat_interval: \"hb interval per admitted command\"; \"heartbeats run until "
           "the command's first res is published\"",
           ("parley_handler.heartbeats_until_the_result",), _ALL),
    Clause("H4", "handler", "config.py, handler.py",
           "max_concurrent_executions: \"maximum commands executing concurrently (default 1, "
           "serial)\"; \"dequeue FIFO into at most max_concurrent_executions slots\"",
           ("parley_handler.executions_within_the_cap",), _ALL,
           exercised="waited_for_a_slot"),
    Clause("H5", "handler", "config.py, README",
           "result_retry_interval: \"res re-publish interval until acked\"; "
           "result_retry_timeout: \"result-retry give-up window\"; README: \"results are "
           "re-sent until acknowledged\"",
           ("parley_handler.results_resent_until_acknowledged",),
           ("parley_partition", "parley_pause", "parley_broker_restart", "parley_qos0"),
           exercised="results_resent"),
    Clause("H6", "handler", "handler.py",
           "\"a rak for an id not in RESULT-CACHED is ignored\"; a rak moves the command to "
           "its tombstone",
           ("parley_handler.acknowledged_results_not_resent",), _ALL),
    Clause("H7", "handler", "handler.py, README",
           "\"abort the execution signal AND cancel the handler task\"; a queued command: "
           "\"dequeue and produce a cached, retried $cancelled result\"; README: "
           "\"Cancellation that reaches the running handler\"",
           ("parley_handler.cancels_reach_the_running_handler",), ("parley_cancel",),
           exercised="cancels_while_running"),
    Clause("adapter", "both", "adapter.py",
           "\"All publishes MUST use retain=false and MAY be QoS 0 or 1\"",
           ("parley_envelope.publishes_never_retained",), _ALL),
    Clause("§3, §4", "both", "_envelope.py, config.py",
           "the envelope {v: 1, t, id, p, ok, e, m}: six types, ok on res, e when ok is "
           "false; four distinct topics per command type; the six builtin codes (§5), "
           "$decodeError \"never on the wire\"",
           ("parley_envelope.messages_are_envelopes",), _ALL),
    Clause("§4.2", "commander", "id_generator.py",
           "\"Ids MUST be 1–64 chars from [A-Za-z0-9_-] and carry at least 64 bits of "
           "randomness\"",
           ("parley_envelope.command_ids_are_valid_and_fresh",), _ALL),
)

#: what conform's CMD may play, and the clauses each role keeps
ROLES = ("handler", "commander")


def binding(role: str) -> tuple[Clause, ...]:
    """The clauses a library in `role` keeps."""
    return tuple(c for c in CLAUSES if c.role in (role, "both"))


#: the broker conform runs the suite on (a conforming MQTT 3.1.1 broker)
BROKER = "mosquitto"
#: where conform's CMD runs, as its report's first line says it
SETUP = "every {role} of a Parley pair, the other side the library behind examples/parley"
#: the document the clauses come from (compatibility.json's `spec`)
DOCUMENT = "docs/protocols/parley.md"
#: conform --help's paragraph and example lines for it
HELP = ("--protocol parley: CMD as every handler of a Parley v1 pair (--role\n"
        "commander: every commander), the other side parley-mqtt's own class behind\n"
        "examples/parley, on Mosquitto, through each shipped parley_* scenario\n"
        "(a kill, redelivery, a partition, a pause, cancels, QoS 0, ...); one row\n"
        "per clause of docs/protocols/parley.md that binds the role. About 9 minutes.")
EXAMPLES = ("a2a-bench conform --protocol parley 'python examples/parley/handler.py'",)
