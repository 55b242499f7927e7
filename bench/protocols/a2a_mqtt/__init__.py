"""The A2A-over-MQTT profile (emqx/mqtt-for-ai): requesters and responders on
`$a2a/v1/...`, cards, pools, MQTT 5 only. Its clause table (`clauses`), its sans-IO
responder and requester, its checkers (`rules`), its hostile inputs (`attacks`, `faults`),
what a deployment gives its agents (`deploy`, `settings`: the `[a2a]` table) and its
conform kit (`conform`: both roles' suites and rules) live here."""

from __future__ import annotations

from bench.protocols import ProtocolSpec
from bench.spec.topology import MqttVersion, Role

SPEC = ProtocolSpec(
    "a2a-mqtt", "A2A over MQTT", (MqttVersion.V5,),
    mqtt_why="the A2A-over-MQTT profile speaks MQTT 5 only (A2M-SESS-1)",
    roles={"requester": Role.ORCHESTRATOR, "responder": Role.EXECUTOR},
    section="a2a",
    node_keys=frozenset({"pool", "hands_over_to", "pool_shared", "capacity"}),
    workload_keys=frozenset({"streaming_fraction", "get_fraction", "cancel_fraction",
                             "multi_turn_fraction", "pool_fraction",
                             # when a GetTask or CancelTask follows its request (Parley's
                             # cancels too)
                             "follow_up_ms",
                             # shared with the seed protocol (an agent nobody serves; the
                             # flow a streamed task sends; conversations, as contexts)
                             "unknown_agent_fraction", "stream_events", "thinking_fraction",
                             "conversations", "no_conversation_fraction"}),
    optional_subjects={
        "a2a_pools": lambda w, t: w.pool_fraction > 0,
        # bearer tokens: only where the topology's responders require them ([a2a.oauth])
        "a2a_oauth": lambda w, t: "oauth" in t.table("a2a"),
        # handover: only where a card owner hands its tasks over (a node's hands_over_to)
        "a2a_handover": lambda w, t: bool(t.delegates)},
    fault_kinds=frozenset({"malformed_request"}),
    deploy="bench.protocols.a2a_mqtt.deploy", settings="bench.protocols.a2a_mqtt.settings",
    checkers="bench.protocols.a2a_mqtt.rules", startup="bench.protocols.a2a_mqtt.startup",
    faults="bench.protocols.a2a_mqtt.faults", conform="bench.protocols.a2a_mqtt.conform",
    extras=("sdk",),
    explore="bench.protocols.a2a_mqtt.explore",
    shared_checkers=frozenset({"duplicate_execution"}))
