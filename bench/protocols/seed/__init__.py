"""The seed documents' protocol (DESIGN.md): directory announcements, task requests and
responses, relay streams and gates between nodes over MQTT 3.1.1 (or 5). Its sans-IO node
(`node` and the machines it drives: `directory`, `ledger`, `outbox`, `task`, `request`,
`relay`, `process`, `gate`, ...), its rules (`rules`), start-up lines, drafts for explore
and conform kit live here; what every protocol's nodes and hosts share (the history's
events, the inputs and commands between a host and its node) is bench/core."""

from __future__ import annotations

from bench.protocols import ProtocolSpec
from bench.spec.topology import MqttVersion

SPEC = ProtocolSpec(
    "seed", "the seed protocol", (MqttVersion.V311, MqttVersion.V5), envelope_auth=True,
    # whose announcements a node reads, and the scene groups its events go to: its own
    topology_keys=frozenset({"directory"}), node_keys=frozenset({"scene_groups"}),
    # what only its nodes do: process instances with their gates (seed 003), scene groups'
    # multicast events, the relay's watching tabs (seed 002), a request's targetNodeId
    # (A2A's requester addresses agents only); and what it shares with A2A over MQTT: an
    # agent no roster has, streamed flows. A protocol's nodes that do none of it would be
    # sent none of it, and the run would say nothing
    workload_keys=frozenset({"process_fraction", "group_event_rate_per_s",
                             "tabs_per_conversation", "misaddressed_fraction",
                             "explicit_target_fraction", "unknown_agent_fraction",
                             "stream_events", "thinking_fraction",
                             # its requester's deadline and its executor's watchdog (A2A's
                             # requester keeps the profile's own timeouts; Parley's adapters
                             # set none)
                             "request_timeout_ms", "task_timeout_ms",
                             # what shapes its process instances, gates and watching tabs
                             "gate_fraction", "parallel_branches", "subflow_fraction",
                             "step_duration_ms", "step_failure_rate", "step_retries",
                             "humans", "reject_fraction", "gate_timeout_ms",
                             "gate_on_timeout", "watched_fraction", "tab_churn",
                             # conversations (A2A's contexts; Parley's commands have none)
                             "conversations", "no_conversation_fraction"}),
    optional_subjects={
        "relay_integrity": lambda w, t: w.stream_events > 0,
        "relay_locality": lambda w, t: w.stream_events > 0,
        "gate_integrity": lambda w, t: w.process_fraction > 0 and w.gate_fraction > 0,
        "context_isolation": lambda w, t: w.process_fraction > 0},
    # its hostile input, and what acts on its directory, roster, envelopes and keys: on
    # another protocol's nodes each would act on nothing they have (directory_wipe "fired"
    # on a2a-pair and changed nothing; missing_reply_node never fired)
    fault_kinds=frozenset({"malformed_envelope", "empty_directory", "directory_wipe",
                           "ghost_announcement", "stale_roster", "forged_sender",
                           "ledger_poisoning", "hostile_input", "replay", "tamper_payload",
                           "tamper_routing", "tamper_headers", "key_rotation",
                           "missing_reply_node"}),
    # a crash timed by its inbound ledger's flush, which another protocol's nodes do not
    # keep (on a2a-pair the crash only moved, to the next tick of a flush nobody does)
    fault_params=frozenset({"restart.in_flush_window"}),
    checkers="bench.protocols.seed.rules", startup="bench.protocols.seed.startup",
    explore="bench.protocols.seed.explore",
    conform="bench.protocols.seed.conform")
