"""The fault catalogue (the nemesis): what can be broken, with which parameters, and the one
script that breaks it on every substrate.

Each fault is journaled in the history (`fault_start`) before it takes effect, records
every time it actually does something (`fault_fired`), and is healed at the end of its
window (`fault_healed`); a primitive a substrate cannot carry out is journaled
(`fault_refused`). A fault that never fired makes the verdicts UNKNOWN, not TRUE.
The runner that plays the scripts is `bench.faults.runner`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.core.properties import TAMPERABLE
from bench.faults import envelope_attacks, scripts
from bench.faults.spec import AGENT_KEYS, SIGNED, FaultKind, FaultSpec, Param
from bench.faults.spec import parse_fault as _parse_fault
from bench.protocols import protocols
from bench.spec.topology import Topology

__all__ = ["CATALOGUE", "FaultKind", "FaultSpec", "Param", "parse_fault"]


def _node(help: str = "the node it acts on", required: bool = True) -> Param:
    return Param("node", help, required=required)


def _always(_params: Mapping[str, Any]) -> bool:
    return True


def _alters_signed(_params: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    # an unsigned request is forged_sender's business: there is no signature to defeat
    return "alters signed requests in flight", SIGNED


REDELIVERY_METHODS = ("redeliver", "withhold_puback", "duplicate_publish")

CATALOGUE: dict[str, FaultKind] = {k.name: k for k in (
    FaultKind("qos1_redelivery", "the node gets QoS1 messages again: the broker re-sends "
              "delivered ones with DUP, optionally much later (EMQX-style delayed "
              "redelivery), or must redeliver unacknowledged ones, or a PUBLISH arrives twice", {
                  "probability": Param("probability", "chance that a delivery is re-sent (once: a copy is "
                                       "not re-sent again)", 0.5,
                                       only_when=("method", ("redeliver", "duplicate_publish"))),
                  "delay_ms": Param("distribution", "delay before the re-send",
                                    {"dist": "uniform", "low": 50, "high": 2000},
                                    only_when=("method", ("redeliver",))),
                  "node": _node("only deliveries to this node (default: all)", required=False),
                  "method": Param("choice", "redeliver (a delivered message is delivered again "
                                  "after the delay: the simulated broker re-sends it, live a "
                                  "capture client publishes the same bytes again), "
                                  "withhold_puback (the node's PUBACKs are dropped, then its "
                                  "link is cut: the broker must redeliver with DUP) or "
                                  "duplicate_publish (a PUBLISH reaches the node twice, same "
                                  "packet id, with the probability)", "redeliver",
                                  choices=REDELIVERY_METHODS)},
              scripts.qos1_redelivery,
              on_link=lambda p: p.get("method") in ("withhold_puback", "duplicate_publish"),
              check=lambda p: None if p["method"] == "redeliver" or p["node"] is not None else
              f"method = {p['method']!r} acts on one node's link: give the fault a node"),
    FaultKind("double_subscription", "the node is subscribed to its inbox twice: by a "
              "second MQTT connection in its process (every message arrives twice, on any "
              "broker), or by a second, overlapping filter on its own connection (one copy "
              "or one per filter: the broker decides)", {
                  "node": _node(),
                  "form": Param("choice", "second_connection or overlapping_filters "
                                "(a multi-level wildcard under the node's own level, beside "
                                "its inbox, on its own client)", "second_connection",
                                choices=("second_connection", "overlapping_filters"))},
              scripts.double_subscription),
    FaultKind("empty_directory", "the node restarts with an empty roster", {
        "node": _node(), "down_ms": Param("ms", "how long it is down", 500)},
        scripts.empty_directory, disrupts=True),
    FaultKind("directory_wipe", "someone on the broker (an operator's clean-up tool, a "
              "misbehaving client) clears the node's retained directory announcement while it "
              "runs: an empty retained message on its directory topic", {
                  "node": _node("the node whose announcement is cleared")},
              scripts.directory_wipe, disrupts=True),
    FaultKind("ghost_announcement", "a retained announcement of a node that is gone stays on "
              "the broker: offline, yet listing the live node's agents (an older release's will "
              "kept them), under a node id that sorts after the live one's; online announcers "
              "must win. Cleared when the fault heals", {
                  "node": _node("the live node whose agents the ghost lists"),
                  "ghost": Param("text", "the gone node's id (default: <node>~ghost)", "")},
              scripts.ghost_announcement),
    FaultKind("stale_roster", "the node restarts in another namespace (its old roster file "
              "still on disk)", {
                  "node": _node(), "namespace": Param("text", "the new namespace", required=True),
                  "agents": Param("texts", "the new agents", required=True),
                  "down_ms": Param("ms", "how long it is down", 500)},
              scripts.stale_roster, disrupts=True),
    FaultKind("restart", "crash the node (what was not committed is lost), or stop it "
              "gracefully, and start it again from its data", {
                  "node": _node(), "down_ms": Param("ms", "how long it is down", 1000),
                  "in_flush_window": Param("bool", "crash just before the ledger's next flush",
                                           False),
                  "graceful": Param("bool", "stop it as an operator does, with SIGTERM (the "
                                    "node is told, commits what it handled, says goodbye and "
                                    "sends DISCONNECT: no will) instead of killing it (SIGKILL)",
                                    False)},
              scripts.restart, disrupts=True),
    FaultKind("broker_restart", "the broker crashes and comes back", {
        "down_ms": Param("ms", "how long it is down", 1000),
        "persistence": Param("bool", "sessions and retained messages survive (the simulated "
                             "broker; a real one keeps what its configuration keeps)", True),
        "graceful": Param("bool", "stop with SIGTERM so the broker can save its state "
                          "(false: SIGKILL, a crash)", True)},
        scripts.broker_restart, disrupts=True),
    FaultKind("pause", "freeze a node: alive and connected, handling and sending nothing (the "
              "cgroup freezer in docker, SIGSTOP for a node process, a frozen host in "
              "simulation); the broker finds out at its keepalive, or never", {
                  "node": Param("node", "the node frozen", required=True)},
              scripts.pause, disrupts=True),
    FaultKind("partition", "cut nodes off the broker; connections die after the keepalive",
              {"nodes": Param("nodes", "the nodes cut off", required=True),
               "how": Param("choice", "blackhole (packets vanish, the interface stays: a new "
                            "connection hangs until its timeout) or unplug (the cable is out: "
                            "a new connection fails at once; docker: network disconnect)",
                            "blackhole", choices=("blackhole", "unplug")),
               "direction": Param("choice", "which way packets vanish: both, to_broker (the "
                                  "node's: it still hears the broker, whose keepalive gives it "
                                  "up and whose close reaches it) or from_broker (the broker's: "
                                  "the node's packets still arrive — its publishes are routed, "
                                  "their acknowledgements lost — until its own keepalive "
                                  "closes it, which the broker hears). A new connection needs "
                                  "both ways: it hangs", "both",
                                  choices=("both", "to_broker", "from_broker"))},
              scripts.partition, disrupts=True, on_link=_always,
              check=lambda p: "how = 'unplug' takes the cable out both ways: direction must "
                              "be 'both'" if p["how"] == "unplug" and p["direction"] != "both"
                              else None),
    FaultKind("latency", "slow the links of nodes down", {
        "nodes": Param("nodes", "the nodes", required=True),
        "latency_ms": Param("distribution", "link latency during the window", required=True)},
        scripts.latency, disrupts=True, on_link=_always),
    FaultKind("loss", "lose packets on the links of nodes (TCP retransmits them late)", {
        "nodes": Param("nodes", "the nodes", required=True),
        "probability": Param("probability", "loss probability per packet", required=True)},
        scripts.loss, disrupts=True, on_link=_always),
    FaultKind("duplicate_client_id", "a second node connects with the node's client id "
              "(session takeover, seed 002 §11.1 red line 1)", {
                  "node": _node("the node whose client id is reused"),
                  "impostor": _node("the node that reuses it")},
              scripts.duplicate_client_id, disrupts=True),
    FaultKind("forged_sender", "an attacker on the broker sends TASK_REQUESTs claiming the "
              "orchestrator's agent to every executor agent, one round per interval", {
                  "how": Param("choice", "unsigned; flat_token (signed with the shared token "
                               "the attacker holds: the flat-token leak); other_agent_key "
                               "(signed with a compromised executor agent's own key)",
                               "unsigned", choices=("unsigned", "flat_token", "other_agent_key")),
                  "interval_ms": Param("ms", "time between rounds", 1000.0),
                  "claims": Param("choice", "whose agent the forgery claims to come from: the "
                                  "orchestrator's, or the target's own (a request that seems "
                                  "to come from the very agent it is sent to, from another "
                                  "node: no self-loop, for admission to judge)",
                                  "orchestrator", choices=("orchestrator", "target"))},
              scripts.forged_sender,
              keys=lambda p: {"flat_token": ("signs with the flat token", SIGNED),
                              "other_agent_key": ("signs with an executor agent's own key",
                                                  AGENT_KEYS)}.get(p["how"])),
    FaultKind("ledger_poisoning", "an attacker on the broker sends unsigned TASK_REQUESTs to "
              "every executor under the messageIds the orchestrator will use next ({node}-m{k}: "
              "predictable), ahead of the genuine ones: refused, they must leave no trace in "
              "the inbound ledger", {
                  "ahead": Param("count", "messageIds forged per round, each to every executor",
                                 10),
                  "interval_ms": Param("ms", "time between rounds", 1000.0)},
              scripts.ledger_poisoning),
    FaultKind("hostile_input", "an insider (a compromised executor agent signing as itself, so "
              "it passes admission) sends other executors TASK_REQUESTs a node must refuse, "
              "not act on: a replyNodeId with '/' or a wildcard (its answer would go to a topic "
              "of the sender's making), a human step nested in a branch, an unknown step "
              "kind, retries out of range, duplicate step ids; one per interval, in turn", {
                  "interval_ms": Param("ms", "time between requests", 500.0)},
              scripts.hostile_input),
    FaultKind("replay", "an attacker captures validly signed TASK_REQUESTs and re-publishes "
              "them byte for byte later", {
                  "probability": Param("probability", "share of captured requests replayed", 0.5),
                  "delay_ms": Param("distribution", "how much later",
                                    {"dist": "uniform", "low": 500, "high": 3000})},
              scripts.replay),
    FaultKind("tamper_payload", "a man in the middle on the node's link alters the payload of "
              "validly signed TASK_REQUESTs in flight, leaving the signature as it was", {
                  "node": _node("the node whose incoming requests are altered"),
                  "probability": Param("probability", "share of requests altered", 1.0)},
              scripts.tamper_payload, on_link=_always, keys=_alters_signed),
    FaultKind("tamper_routing", "a man in the middle on the node's link retargets validly "
              "signed TASK_REQUESTs in flight to the node's other agent (toAgentId)", {
                  "node": _node("the node whose incoming requests are altered"),
                  "probability": Param("probability", "share of requests altered", 1.0)},
              scripts.tamper_routing, on_link=_always, keys=_alters_signed),
    FaultKind("tamper_headers", "a man in the middle on the node's link rewrites the "
              "headers.replyNodeId of validly signed TASK_REQUESTs in flight to a node of "
              "its own, so that the answer goes to the attacker", {
                  "node": _node("the node whose incoming requests are altered"),
                  "probability": Param("probability", "share of requests altered", 1.0)},
              scripts.tamper_headers, on_link=_always, keys=_alters_signed),
    FaultKind("clock_skew", "the node's clock runs off by a fixed offset: what it signs carries "
              "its time, and it judges others' timestamps by it", {
                  "node": _node(),
                  "skew_ms": Param("offset_ms", "the offset (negative: behind)", required=True)},
              scripts.clock_skew),
    FaultKind("key_rotation", "an agent's key is rotated mid-run: every node gets the new key "
              "and accepts the old one for an overlap window, except a stale node that never "
              "gets the new key", {
                  "agent": Param("agent", "the agent whose key rotates", required=True),
                  "stale_node": _node("a node left with the old key (default: none)",
                                      required=False),
                  "overlap_ms": Param("ms", "how long the old key is still accepted", 3000.0)},
              scripts.key_rotation, keys=lambda p: ("rotates an agent's own key", AGENT_KEYS)),
    FaultKind("publish_failure", "the node's MQTT client refuses publishes (a full send "
              "queue, a payload over the broker's limit): each refused message ends FAILED and "
              "a refused request SEND_FAILED (seed 002 §5's fourth outbound state)", {
                  "node": _node("the node whose client refuses"),
                  "probability": Param("probability", "share of publishes refused", 0.5)},
              scripts.publish_failure),
    FaultKind("puback_refused", "MQTT 5: a share of the node's QoS1 publishes is refused "
              "as a broker refuses one over its quota or its ACL: not routed, and "
              "acknowledged with a PUBACK failure reason code; each such message ends FAILED "
              "with the code, a refused request SEND_FAILED", {
                  "node": _node("the node whose publishes are refused"),
                  "probability": Param("probability", "share of its QoS1 publishes refused", 0.5),
                  "reason_code": Param("choice", "the PUBACK reason code: 0x97 quota exceeded, "
                                       "0x87 not authorized, 0x80 unspecified error, 0x83 "
                                       "implementation specific error, 0x90 topic name "
                                       "invalid, 0x99 payload format invalid", "0x97",
                                       choices=("0x97", "0x87", "0x80", "0x83", "0x90", "0x99"))},
              scripts.puback_refused, on_link=_always, mqtt5=True),
    FaultKind("property_tampering", "MQTT 5: on the node's link, a share of its PUBLISHes "
              "loses a property, or has it altered (\"|tampered\" appended), on the way to "
              "the broker: a Response Topic, Correlation Data or a User Property, as a "
              "bridge, a gateway or a broker that drops properties would — or gains a User "
              "Property it did not send; each time is counted and journaled", {
                  "node": _node("the node whose publishes are tampered with"),
                  "property": Param("choice", "response_topic, correlation_data or "
                                    "user_property", "correlation_data", choices=TAMPERABLE),
                  "action": Param("choice", "strip (removed), alter (\"|tampered\" "
                                  "appended to its value) or add (a User Property it lacks, "
                                  "its value \"|tampered\"; one it has, altered)", "strip",
                                  choices=("strip", "alter", "add")),
                  "key": Param("text", "the User Property's name (property = user_property)",
                               "a2a-context-id", only_when=("property", ("user_property",))),
                  "probability": Param("probability", "share of its publishes tampered with",
                                       0.5)},
              scripts.property_tampering, on_link=_always, mqtt5=True,
              check=lambda p: None if p["action"] != "add" or p["property"] == "user_property"
              else f"action = \"add\" adds a User Property (property = \"user_property\"), "
                   f"not {p['property']}"),
    FaultKind("malformed_envelope", "the bench publishes to executors' inboxes envelopes "
              "DESIGN §3 rules out, each one step from a valid TASK_REQUEST — bytes that are "
              "no UTF-8 or no JSON, NaN or a number no double holds, an array or null, an "
              "unknown field or message type, a required field missing, a string field empty "
              "or a number, a timestamp negative or a string, headers that are no object of "
              "strings; a FLOW_EVENT, gate message or answer whose body has one field "
              "wrong — and one at the edge of well-formed (headers null), one of 2 MiB; "
              "and announcements that are none (not JSON, an array, a nodeId other than "
              "the topic's, a field of the wrong type) under node ids nobody has: each "
              "case in turn; each must be dropped MALFORMED with a reason (the edge one "
              "taken), refused from the directory, never run, never a crash", {
                  "node": _node("the executor (default: every executor in turn)",
                                required=False),
                  "interval_ms": Param("ms", "time between two messages", 200.0),
                  "cases": Param("texts", "the cases to send, in turn (default: every one)",
                                 envelope_attacks.CASES, choices=envelope_attacks.CASES)},
              scripts.malformed_envelope),
    FaultKind("missing_reply_node", "the requester sends TASK_REQUESTs without "
              "headers.replyNodeId (seed D14)", {
                  "node": _node("the requester"),
                  "probability": Param("probability", "share of requests affected", 1.0)},
              scripts.missing_reply_node),
)}
# each protocol's own fault kinds (its hostile inputs: `ProtocolSpec.faults`), beside these
for _spec in protocols().values():
    if (_own := _spec.module("faults")) is not None:
        CATALOGUE.update({k.name: k for k in _own.FAULTS})

#: Keys renamed since earlier versions: an old scenario file gets told the new name.
RENAMED = {"live_method": "method"}


def parse_fault(raw: Any, index: int, where: str, topology: Topology) -> FaultSpec:
    """`where` is "file: faults[i]"; every error names the key and what was expected."""
    return _parse_fault(raw, index, where, topology, CATALOGUE, RENAMED)
