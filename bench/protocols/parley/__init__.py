"""Parley v1 (`parley-mqtt` 1.0.1 on PyPI, import `parley`): request/response RPC over MQTT
3.1.1 — a commander sends a command on a request topic, a handler heartbeats it, streams
progress and answers once on a result topic, and the commander acknowledges the result.
The bench has no node of its own for it: it judges the library's own `ParleyCommander`
and `ParleyCommandHandler`, unmodified, behind the adapters in examples/parley/, from the
wire (`wire`: the tap's own parser) against the promises its README makes and the rules
its modules cite (`clauses`). Its topology table is `[parley]` (the four topics and the
§8 timing, `settings`)."""

from __future__ import annotations

from bench.protocols import ProtocolSpec
from bench.spec.topology import MqttVersion, Role

SPEC = ProtocolSpec(
    "parley", "Parley v1", (MqttVersion.V311,),
    mqtt_why="Parley v1 needs only MQTT 3.1.1 (its README), and its adapters "
             "(examples/parley/) speak it",
    roles={"commander": Role.ORCHESTRATOR, "handler": Role.EXECUTOR},
    section="parley",
    # a command called off after it was sent (C7): the commander's cancel signal
    workload_keys=frozenset({"cancel_fraction", "follow_up_ms"}),
    deploy="bench.protocols.parley.deploy", settings="bench.protocols.parley.settings",
    checkers="bench.protocols.parley.rules", wire="bench.protocols.parley.wire",
    startup="bench.protocols.parley.startup", conform="bench.protocols.parley.clauses",
    extras=("parley",))
