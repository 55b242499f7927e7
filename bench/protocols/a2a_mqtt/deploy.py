"""What a deployment gives a node of an A2A-over-MQTT topology (`ProtocolSpec.deploy`): its
MQTT client id (A2M-SESS-3) and what it is as an agent. The substrates ask through the
protocol's spec; none of them names the profile."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from bench.core.config import A2aAgent, OAuth
from bench.protocols.a2a_mqtt import settings
from bench.spec.topology import NodeSpec, Role, Topology

if TYPE_CHECKING:
    from bench.spec.scenario import Scenario


def client_id(node: NodeSpec, topology: Topology) -> str:
    """`{org}/{unit}/{agent}` (A2M-SESS-3), unless the topology names one."""
    return node.client_id or f"{settings.org(topology)}/{node.namespace}/{node.agents[0]}"


def node_fields(node: NodeSpec, scenario: Scenario, run_id: str | None) -> dict[str, Any]:
    """The NodeConfig fields of `node` as an agent of the profile. A requester's reply suffix
    is 64 bits from the run's seed (and run id): collision resistant (A2M-SESS-4), the same
    run after run with one seed, as the simulator's every draw."""
    t, responder = scenario.topology, node.role is Role.EXECUTOR
    org, tokens = settings.org(t), settings.oauth(t)
    assert org is not None
    oauth = None if tokens is None else OAuth.of_run(
        scenario.seed, org, node.namespace, signer=not responder, issuer=tokens.issuer,
        scope=tokens.scope, ttl_s=tokens.token_ttl_s)
    to = t.node(node.hands_over_to).agents[0] if node.hands_over_to else None
    suffix = None if responder else "r-" + hashlib.sha256(
        f"{scenario.seed}/{run_id or ''}/{node.id}/reply".encode()).hexdigest()[:16]
    return {"a2a": A2aAgent(org, responder, node.pool, settings.request_expiry_s(t), oauth, to,
                            node.id in t.delegates, suffix, node.pool_shared, node.capacity)}


def run_fields(topology: Topology, run_id: str | None = None) -> dict[str, Any]:
    """What run_started says of the profile's settings: bearer tokens required or not."""
    return {"bearer_tokens": True if settings.oauth(topology) else None}
