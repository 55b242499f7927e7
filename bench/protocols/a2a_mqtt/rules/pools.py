"""A2A over MQTT, shared-subscription pools (`a2a_pools`): a reply to a pooled request names the member that answered."""

from __future__ import annotations

import re
from collections import defaultdict

from bench.checks import Checker, Collector, rule
from bench.core.events import (
    A2mAttempt,
    A2mReplyTaken,
    Event,
    ExecutorsRegistered,
    Wire,
)
from bench.history import History
from bench.protocols.a2a_mqtt import SPEC
from bench.protocols.a2a_mqtt.rules.common import _pool_of, _tampering


@rule("A2M-RSP-5, A2M-REQ-3: a reply to a pooled request names the responder that answered")
def pooled_replies_name_their_responder(h: History, c: Collector) -> None:
    """Every reply a requester took for a request it sent to a pool carries User Property
    a2a-responder-agent-id: without it the requester cannot send the task's follow-ups to
    the member that holds it. Judged per attempt (by its Correlation Data): a follow-up of
    a pooled task sent to the member's own topic gets a plain reply. A reply taken while a
    property_tampering fault stripped User Properties on the way is not its responder's
    doing (counted)."""
    pooled = {(a.node, a.correlation) for a in h.of(A2mAttempt) if _pool_of(a.topic)}
    stripping = [w for ws in _tampering(h, "user_property", "strip").values() for w in ws]
    for r in h.of(A2mReplyTaken):
        if r.op_id is None or (r.node, r.correlation) not in pooled:
            continue
        if r.responder_agent_id is None and any(a <= r.t_ms <= b for a, b in stripping):
            c.count("pooled_replies_stripped_on_the_way")
            continue
        c.count("pooled_replies")
        if r.responder_agent_id is None:
            c.violation(f"{r.node} got a reply to pooled {r.op_id} naming no responder", r)


#: A pool member's filter: `$share/{group_id}/$a2a/v1/request/{org}/{unit}/pool/{pool_id}`
POOL_FILTER = re.compile(r"^\$share/([^/]+)/(\$a2a/v1/request/[^/]+/[^/]+/pool/[^/]+)$")


@rule("A2M-POOL-1: the members of one pool share one group_id")
def pool_members_share_a_group(h: History, c: Collector) -> None:
    """Every agent subscribed to a pool's request topic (its SUBSCRIBE off the wire, or the
    filters it recorded subscribing) uses the same `$share/{group_id}/` for it as every
    other member: two groups on one pool topic each get a copy of every request — the pool
    runs each twice."""
    groups: dict[str, dict[str, tuple[str, Event]]] = defaultdict(dict)  # pool -> group -> first
    for node, f, event in _subscribed(h):
        m = POOL_FILTER.match(f)
        if m is None:
            continue
        group, pool = m.groups()
        c.count("pool_subscriptions")
        groups[pool].setdefault(group, (node, event))
    for pool, by_group in sorted(groups.items()):
        if len(by_group) > 1:
            (g1, (n1, e1)), (g2, (n2, e2)) = sorted(by_group.items())[:2]
            c.violation(f"{n1} joined pool {pool} as group {g1!r} and {n2} as group {g2!r}: "
                        "one pool, one group_id", e1, e2)


def _subscribed(h: History) -> list[tuple[str, str, Event]]:
    """Every filter a node subscribed to, (node, filter, the event that says so): those it
    recorded subscribing, and those its SUBSCRIBEs carried off the wire."""
    filters: list[tuple[str, str, Event]] = [
        (r.node, f, r) for r in h.of(ExecutorsRegistered) for f in r.subscribed]
    filters += [(w.node, f, w) for w in h.of(Wire)
                if w.packet == "SUBSCRIBE" and w.direction == "out" for f in w.filters or ()]
    return filters


def _no_pool(h: History) -> str | None:
    pooled = {(a.node, a.op_id) for a in h.of(A2mAttempt) if _pool_of(a.topic)}
    if not pooled:
        return "no request was sent to a pool"
    if any((r.node, r.op_id) in pooled for r in h.of(A2mReplyTaken)):
        return None
    if not any(POOL_FILTER.match(f) for _node, f, _event in _subscribed(h)):
        # (pools are Extended: a responder that serves only its own topic joins none)
        return ("no reply to a pooled request came back: no responder subscribed to a pool "
                "($share/{group}/$a2a/v1/request/{org}/{unit}/pool/{pool})")
    return "no reply to a pooled request came back"


A2A_POOLS = Checker(
    "a2a_pools", "A2A over MQTT, shared-subscription pools: a reply to a pooled request names "
    "the member that answered.",
    (pooled_replies_name_their_responder, pool_members_share_a_group), _no_pool,
    protocols=frozenset({SPEC.name}))
