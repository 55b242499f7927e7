"""Delivery: no silent loss, targeted delivery, reply routing (DESIGN §7, seed 002 §3–§5)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from bench.checks import Collector, History, Verdict
from bench.core.directory import DEFAULT_EXECUTOR_ID, namespace_of

#: Faults whose windows can legitimately swallow a request (then it is INFO, not silent).
DISRUPTIVE = {"restart", "broker_restart", "partition", "duplicate_client_id", "empty_directory",
              "stale_roster", "loss", "latency"}
EXPLAINING_STATES = {"UNDELIVERABLE", "FAILED"}


def _fault_windows(h: History) -> list[tuple[float, float, str, int]]:
    healed = {e["faultIndex"]: float(e["tMs"]) for e in h.of("fault_healed")}
    return [(float(e["tMs"]), healed.get(e["faultIndex"], h.end_ms), e["fault"], e["seq"])
            for e in h.of("fault_start") if e["fault"] in DISRUPTIVE]


def silent_loss(h: History) -> Verdict:
    """Every request ends in exactly one outcome, and a request that got no response has an
    explanation in the history: an UNDELIVERABLE/FAILED send, a recorded drop of the request
    or its response, or a disruptive fault during its lifetime. Otherwise it was lost
    silently."""
    c = Collector("silent_loss")
    settled: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in h.of("request_settled"):
        settled[(e["node"], e["requestId"])].append(e)
    explained: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in h.of("outbound_settled"):
        if e.get("requestId") and e["state"] in EXPLAINING_STATES:
            explained[e["requestId"]].append(e)
    for e in h.of("inbound_dropped"):
        if e.get("requestId") and e["reason"] != "DUPLICATE":
            explained[e["requestId"]].append(e)
    windows = _fault_windows(h)
    for sent in h.of("request_sent"):
        rid = sent["requestId"]
        c.count("requests")
        outcomes = settled.get((sent["node"], rid), [])
        if not outcomes:
            if float(sent["deadlineMs"]) > h.end_ms:
                c.unknown("pending_at_end")
            else:
                c.violation(f"request {rid} passed its deadline and never settled", sent)
            continue
        if len(outcomes) > 1:
            c.violation(f"request {rid} settled {len(outcomes)} times", sent, *outcomes)
        outcome = outcomes[0]
        c.count(f"outcome_{outcome['outcome'].lower()}")
        if outcome["outcome"] != "NO_RESPONSE":
            continue
        if explained.get(rid):
            c.count("no_response_explained_by_record")
            continue
        start, end = float(sent["tMs"]), float(outcome["tMs"])
        if any(ws <= end and we >= start for ws, we, _k, _s in windows):
            c.count("no_response_during_fault")
            continue
        c.violation(f"request {rid} to {sent['toAgentId']} got no response and nothing in the "
                    "history says why", sent, outcome, requestId=rid)
    return c.verdict()


def targeted_delivery(h: History) -> Verdict:
    """Targeted messages are published to a real node's inbox, consumed only by the node
    they address, and a TASK_REQUEST is never executed across namespaces."""
    c = Collector("targeted_delivery")
    nodes = h.nodes
    for e in h.of("outbound_settled"):
        if e["state"] not in ("PUBLISHED",) or e["messageType"] == "EVENT":
            continue
        c.count("targeted_published")
        target = e.get("targetNodeId")
        if target not in nodes:
            c.violation(f"{e['messageType']} {e['messageId']} was published to "
                        f"{e.get('topic')!r}: targetNodeId {target!r} is not a node", e)
        elif not str(e.get("topic", "")).endswith(f"/node/{target}/inbox"):
            c.violation(f"{e['messageId']} targeted {target} but went to {e.get('topic')!r}", e)
    for e in h.of("inbound_admitted"):
        if e["messageType"] not in ("TASK_REQUEST", "TASK_RESPONSE", "DATA_REQUEST", "DATA_RESPONSE"):
            continue
        c.count("targeted_consumed")
        if e.get("targetNodeId") != e["node"]:
            c.violation(f"{e['messageType']} {e['messageId']} addressed to "
                        f"{e.get('targetNodeId')!r} was consumed by {e['node']}", e)
        if e["messageType"] == "TASK_REQUEST":
            to = e.get("toAgentId") or ""
            node_ns = h.namespace_at(e["node"], e["seq"])
            if to != DEFAULT_EXECUTOR_ID and namespace_of(to) != node_ns:
                c.violation(f"TASK_REQUEST for {to!r} executed by {e['node']} in namespace "
                            f"{node_ns!r}", e)
    return c.verdict()


def reply_routing(h: History) -> Verdict:
    """A TASK_RESPONSE goes to the node named by the request's headers.replyNodeId with the
    requestId echoed; a request without replyNodeId yields a warning and an UNDELIVERABLE
    response (never a guess)."""
    c = Collector("reply_routing")
    requests: dict[tuple[str, str], dict[str, Any]] = {}
    for e in h.of("inbound_admitted"):
        if e["messageType"] == "TASK_REQUEST" and e.get("requestId"):
            requests.setdefault((e["node"], e["requestId"]), e)
    warned = {(e["node"], e.get("taskId")) for e in h.of("warning")
              if e.get("what") == "missing replyNodeId"}
    for e in h.of("outbound_settled"):
        if e["messageType"] != "TASK_RESPONSE":
            continue
        c.count("responses")
        rid = e.get("requestId")
        if not rid:
            c.violation(f"response {e['messageId']} does not echo a requestId", e)
            continue
        req = requests.get((e["node"], rid))
        if req is None:
            c.count("request_not_in_history")  # e.g. admitted before a restart's history gap
            continue
        reply_node = req.get("replyNodeId")
        if reply_node:
            if e.get("targetNodeId") != reply_node:
                c.violation(f"response to {rid} sent to {e.get('targetNodeId')!r}, but the request "
                            f"named replyNodeId {reply_node!r}", req, e)
            else:
                c.count("routed_to_reply_node")
        else:
            if e["state"] != "UNDELIVERABLE" or (e["node"], rid) not in warned:
                c.violation(f"request {rid} had no replyNodeId, yet its response was "
                            f"{e['state']} to {e.get('targetNodeId')!r}"
                            + ("" if (e["node"], rid) in warned else " without a warning"), req, e)
            else:
                c.count("missing_reply_node_made_explicit")
    return c.verdict()


#: A message published this close to the end of the history may still be on its way.
IN_FLIGHT_AT_END_MS = 2_000


def qos1_delivery(h: History) -> Verdict:
    """MQTT QoS1 on a persistent session is at-least-once: every targeted message the broker
    accepted (PUBLISHED) reaches the node it addresses — admitted there, or at least dropped
    there with a reason — even across reconnects and restarts of that node. Messages lost
    with a broker restarted without persistence are counted apart."""
    c = Collector("qos1_delivery")
    seen: set[tuple[str, str]] = set()
    for e in h.of("inbound_admitted") + h.of("inbound_dropped"):
        if e.get("messageId"):
            seen.add((e["node"], e["messageId"]))
    wipes = [(float(e["tMs"])) for e in h.of("fault_start")
             if e["fault"] == "broker_restart" and not e.get("params", {}).get("persistence", True)]
    # MQTT delivers to a client id, not to a node: once another node holds the target's
    # client id, what it consumes is the takeover's doing (deployment flags the cause).
    hijacked: dict[str, float] = {}
    for e in h.of("mqtt_connected"):
        owner = next((n for n, cid in h.client_ids.items() if cid == e["clientId"]), None)
        if owner is not None and owner != e["node"]:
            hijacked.setdefault(owner, float(e["tMs"]))
    nodes = h.nodes
    for e in h.of("outbound_settled"):
        if e["state"] != "PUBLISHED" or e["messageType"] == "EVENT":
            continue
        target = e.get("targetNodeId")
        if target not in nodes:
            continue  # not an address at all: targeted_delivery's business
        c.count("published")
        if (target, e["messageId"]) in seen:
            c.count("delivered")
            continue
        if float(e["tMs"]) > h.end_ms - IN_FLIGHT_AT_END_MS:
            c.unknown("in_flight_at_end")
            continue
        if any(w >= float(e["tMs"]) for w in wipes):
            c.count("lost_with_non_persistent_broker")
            continue
        if target in hijacked:
            c.count("lost_to_client_id_takeover")
            continue
        c.violation(f"{e['messageType']} {e['messageId']} was accepted by the broker for "
                    f"{target} and never reached it", e, target=target)
    return c.verdict()
