"""What a deployment gives a node of a Parley topology (`ProtocolSpec.deploy`): its role,
the four topics and the timing, as the launch spec's `node.settings` an adapter reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.spec.topology import NodeSpec, Role, Topology

if TYPE_CHECKING:
    from bench.spec.scenario import Scenario


def client_id(node: NodeSpec, topology: Topology) -> str:
    """The topology's client id for the node (empty: the node id)."""
    return node.client_id


def settings(topology: Topology, run_id: str | None = None) -> dict[str, Any]:
    """The `[parley]` table as a run's nodes use it: on a shared broker (`run_id`, an
    isolated run) each topic carries the run's id (`bench/backup/req` ->
    `bench/backup/run-<id>/req`), so two runs' commands never meet."""
    table = dict(topology.table("parley"))
    if run_id is not None:
        table["topics"] = {kind: f"{topic.rsplit('/', 1)[0]}/run-{run_id}/{kind}"
                           for kind, topic in dict(table.get("topics") or {}).items()}
    return table


def node_fields(node: NodeSpec, scenario: Scenario, run_id: str | None) -> dict[str, Any]:
    """What an adapter reads as its launch spec's `node.settings`: its role, the four
    topics, the QoS and the timing of the `[parley]` table."""
    role = "handler" if node.role is Role.EXECUTOR else "commander"
    return {"settings": {"role": role, **settings(scenario.topology, run_id)}}


def run_fields(topology: Topology, run_id: str | None = None) -> dict[str, Any]:
    """run_started records the topics and timing: the rules judge by them."""
    return {"settings": settings(topology, run_id)}


def inbox(topology: Topology, node_id: str | None,
          run_id: str | None = None) -> tuple[str, ...]:
    """The topics that reach `node_id` (None: any node): a handler's request topic, a
    commander's heartbeat, progress and result topics (what a redelivery fault replays)."""
    topics = dict(settings(topology, run_id).get("topics") or {})
    if node_id is None:
        return tuple(topics.values())
    if topology.node(node_id).role is Role.EXECUTOR:
        return (topics["req"],)
    return (topics["hb"], topics["prg"], topics["res"])
