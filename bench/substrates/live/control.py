"""What the runner can ask of a live node, as JSON-able operations, identical whether the
node runs in-process or in its own process (where they arrive as lines on stdin): the
workload's requests and events, and the node-side faults. Also the node's launch spec,
which carries its keys — it travels on stdin, never on a command line."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.core.auth import AuthConfig, AuthMode, KeyRing, Secret, SignatureVersion, sign
from bench.core.config import NodeConfig
from bench.core.envelope import Envelope, Header, MessageType, decode, encode
from bench.core.inputs import (
    GroupEventRequested,
    KeysRotated,
    SubscriberAttached,
    SubscriberDetached,
    TaskRequested,
)
from bench.spec.distribution import rng_for
from bench.substrates.live.host import LiveHost
from bench.workload import Behaviour, workload_from_json


@dataclass(frozen=True)
class LaunchSpec:
    """Everything a node process needs to start: JSON on its first stdin line."""

    config: NodeConfig
    variant: str
    data_dir: Path
    broker: tuple[str, int]
    t0: float
    seed: int
    workload: dict[str, Any]      # WorkloadSpec.to_json(): task and flow models

    def to_json(self) -> dict[str, Any]:
        c, keys = self.config, self.config.auth.keys
        return {
            "node": {"node_id": c.node_id, "namespace": c.namespace, "agents": list(c.agents),
                     "scene_groups": list(c.scene_groups), "client_id": c.client_id,
                     "prefix": c.prefix, "request_timeout_ms": c.request_timeout_ms,
                     "task_timeout_ms": c.task_timeout_ms},
            "auth": {"mode": c.auth.mode.value, "version": c.auth.version.value,
                     "max_skew_ms": c.auth.max_skew_ms,
                     "flat": keys.flat_token.reveal().hex() if keys.flat_token else None,
                     "agents": {a: k.reveal().hex() for a, k in keys.agent_keys.items()}},
            "variant": self.variant, "data_dir": str(self.data_dir), "broker": list(self.broker),
            "t0": self.t0, "seed": self.seed, "workload": self.workload}

    @staticmethod
    def from_json(d: dict[str, Any]) -> LaunchSpec:
        a = d["auth"]
        keys = KeyRing(Secret(bytes.fromhex(a["flat"])) if a["flat"] else None,
                       {k: Secret(bytes.fromhex(v)) for k, v in a["agents"].items()})
        n = d["node"]
        config = NodeConfig(n["node_id"], n["namespace"], tuple(n["agents"]), tuple(n["scene_groups"]),
                            n["client_id"], n["prefix"],
                            AuthConfig(AuthMode(a["mode"]), keys, SignatureVersion(a["version"]),
                                       a["max_skew_ms"]),
                            task_timeout_ms=n["task_timeout_ms"],
                            request_timeout_ms=n["request_timeout_ms"])
        return LaunchSpec(config, d["variant"], Path(d["data_dir"]), (d["broker"][0], d["broker"][1]),
                          d["t0"], d["seed"], d["workload"])

    def behaviour(self) -> Behaviour:
        """The simulator's model of agents and people: a task takes as long live as in
        simulation, streams the same tokens, and a person clicks at the same moment."""
        return Behaviour(workload_from_json(self.workload), self.seed)


def apply_op(host: LiveHost, op: dict[str, Any]) -> None:
    """Carry out one operation on a live node."""
    kind = op["op"]
    now = host.now_ms()
    if kind == "request":
        host.feed(TaskRequested(now, op["request_id"], op["message_id"], op["from_agent_id"],
                                op["to_agent_id"], op.get("payload"), op.get("conversation_id"),
                                None, op.get("target_node_id"), op.get("timeout_ms")))
    elif kind == "tab":
        if op["attach"]:
            host.feed(SubscriberAttached(now, op["subscriber_id"], op["conversation_id"]))
        else:
            host.feed(SubscriberDetached(now, op["subscriber_id"]))
    elif kind == "event":
        host.feed(GroupEventRequested(now, op["message_id"], op["from_agent_id"],
                                      op["scene_group_id"], {"event": op["message_id"]},
                                      op.get("conversation_id")))
    elif kind == "double_subscription":
        if op["on"]:
            topics = host.config.topics
            filters = (topics.inbox(host.node_id),
                       *(topics.group(g) for g in host.config.scene_groups))
            host.add_connection(f"{host.client_id}-sub2", filters, op["faultIndex"])
        else:
            for link in host.extra:
                link.close()
            host.extra.clear()
    elif kind == "keys":
        ring = KeyRing(Secret(bytes.fromhex(op["flat"])) if op.get("flat") else None,
                       {k: Secret(bytes.fromhex(v)) for k, v in op["agents"].items()},
                       {k: Secret(bytes.fromhex(v)) for k, v in op.get("previous", {}).items()})
        host.config = replace(host.config, auth=replace(host.config.auth, keys=ring))
        host.feed(KeysRotated(now, ring))
    elif kind == "clock_skew":
        host.skew_ms = float(op["skew_ms"])
        host.record("clock_set", {"skewMs": host.skew_ms, "faultIndex": op.get("faultIndex")})
    elif kind == "client_id":
        host.client_id_override = op["value"]
        host.reconnect()
    elif kind == "missing_reply_node":
        host.publish_filters[:] = [f for f in host.publish_filters
                                   if getattr(f, "fault", None) != "missing_reply_node"]
        if op["on"]:
            host.publish_filters.append(_strip_reply_node(host, op))
    else:
        raise ValueError(f"unknown live operation {kind!r}")


def _strip_reply_node(host: LiveHost, op: dict[str, Any]) -> Any:
    rng = rng_for(op["seed"], f"fault/{op['faultIndex']}")
    auth = host.config.auth

    def strip(topic: str, payload: bytes) -> bytes:
        env = decode(payload)
        if not isinstance(env, Envelope) or env.message_type is not MessageType.TASK_REQUEST \
                or env.header(Header.REPLY_NODE_ID) is None or rng.random() >= op["probability"]:
            return payload
        host.record("fault_fired", {"fault": "missing_reply_node", "faultIndex": op["faultIndex"],
                                    "messageId": env.message_id,
                                    "requestId": env.header(Header.REQUEST_ID)})
        # the requester's own bug: signed without the header, as the sender would
        stripped = env.with_headers(**{Header.REPLY_NODE_ID.value: None})
        return encode(sign(stripped, auth.keys, host.node_id, auth.version))
    strip.fault = "missing_reply_node"  # type: ignore[attr-defined]
    return strip
