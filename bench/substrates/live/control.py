"""What the runner can ask of a live node, as JSON-able operations, identical whether the
node runs in-process or in its own process (where they arrive as lines on stdin): the
workload's requests and events, and the node-side faults. Also the node's launch spec,
which carries its keys — it travels on stdin, never on a command line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.auth import AuthConfig, AuthMode, KeyRing, Secret, SignatureVersion
from bench.core.config import A2aAgent, NodeConfig, OAuth
from bench.faults.primitives import FaultRef
from bench.spec.brokers import CLIENT
from bench.spec.topology import MqttVersion
from bench.substrates.live.host import Clock, LiveHost, Sink
from bench.substrates.live.mqtt import Tls
from bench.workload import (
    AGENT_OPS,
    OP_KINDS,
    Behaviour,
    agent_input,
    op_from_json,
    op_input,
    workload_from_json,
)


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
    #: the browser tabs watching this node, (subscriber, conversation): they outlive its
    #: process, so a new one is told about them and they attach again
    tabs: tuple[tuple[str, str], ...] = ()
    #: an external broker's user and password (stdin only: never written to a file)
    login: tuple[str, str | None] | None = None
    #: TLS to the broker: an mqtts:// broker's (then never behind the fault proxy), or the
    #: one the bench offers at the node's fault proxy, beside its plain port
    tls: Tls | None = None
    #: who plays the node's agents and people: "node" (drawn from `workload` and `seed` by
    #: Behaviour, as every substrate does) or "bench" (the bench sends agent operations as
    #: lines: a node not written in Python cannot draw from Python's random)
    agents_by: str = "node"
    #: the MQTT version the node's client speaks ("3.1.1" or "5")
    mqtt: MqttVersion = MqttVersion.V311
    #: and on MQTT 5 the Session Expiry Interval its persistent session asks for
    session_expiry_s: int = CLIENT.session_expiry_s

    def to_json(self) -> dict[str, Any]:
        c, keys = self.config, self.config.auth.keys
        return {
            "node": {"node_id": c.node_id, "namespace": c.namespace, "agents": list(c.agents),
                     "scene_groups": list(c.scene_groups), "client_id": c.client_id,
                     "prefix": c.prefix, "request_timeout_ms": c.request_timeout_ms,
                     "task_timeout_ms": c.task_timeout_ms,
                     **({"directory_scope": list(c.directory_scope)} if c.directory_scope else {}),
                     **({"a2a": {"org": c.a2a.org_id, "responder": c.a2a.responder,
                                 "pool": c.a2a.pool_id, "request_expiry_s": c.a2a.request_expiry_s,
                                 **({"oauth": c.a2a.oauth.to_json()} if c.a2a.oauth else {}),
                                 **({"hands_over_to": c.a2a.hands_over_to}
                                    if c.a2a.hands_over_to else {}),
                                 **({"delegate": True} if c.a2a.delegate else {}),
                                 **({"reply_suffix": c.a2a.reply_suffix}
                                    if c.a2a.reply_suffix else {}),
                                 **({} if c.a2a.pool_shared else {"pool_shared": False}),
                                 **({"capacity": c.a2a.capacity}
                                    if c.a2a.capacity is not None else {})}}
                        if c.a2a is not None else {}),
                     **({"settings": dict(c.settings)} if c.settings else {})},
            "auth": {"mode": c.auth.mode.value, "version": c.auth.version.value,
                     "max_skew_ms": c.auth.max_skew_ms,
                     "flat": keys.flat_token.reveal().hex() if keys.flat_token else None,
                     "agents": {a: k.reveal().hex() for a, k in keys.agent_keys.items()}},
            "variant": self.variant, "data_dir": str(self.data_dir), "broker": list(self.broker),
            "t0": self.t0, "seed": self.seed, "workload": self.workload,
            "tabs": [list(t) for t in self.tabs],
            "login": list(self.login) if self.login else None,
            "tls": self.tls.to_json() if self.tls else None,
            "agents_by": self.agents_by, "mqtt": self.mqtt.value,
            "session_expiry_s": self.session_expiry_s}

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
                            request_timeout_ms=n["request_timeout_ms"],
                            directory_scope=tuple(n.get("directory_scope", ())),
                            a2a=A2aAgent(n["a2a"]["org"], bool(n["a2a"]["responder"]),
                                         n["a2a"].get("pool"), n["a2a"].get("request_expiry_s"),
                                         OAuth.from_json(n["a2a"]["oauth"])
                                         if "oauth" in n["a2a"] else None,
                                         n["a2a"].get("hands_over_to"),
                                         bool(n["a2a"].get("delegate", False)),
                                         n["a2a"].get("reply_suffix"),
                                         bool(n["a2a"].get("pool_shared", True)),
                                         n["a2a"].get("capacity"))
                            if "a2a" in n else None, settings=n.get("settings"))
        return LaunchSpec(config, d["variant"], Path(d["data_dir"]), (d["broker"][0], d["broker"][1]),
                          d["t0"], d["seed"], d["workload"],
                          tuple((str(s), str(c)) for s, c in d.get("tabs", [])),
                          (d["login"][0], d["login"][1]) if d.get("login") else None,
                          Tls.from_json(d["tls"]) if d.get("tls") else None,
                          d.get("agents_by", "node"), MqttVersion(d.get("mqtt", "3.1.1")),
                          int(d.get("session_expiry_s", CLIENT.session_expiry_s)))

    def host(self, sink: Sink, clock: Clock) -> LiveHost:
        """The node's host as this spec starts it, in-process or in a node process."""
        from bench.variants import variant
        host = LiveHost(self.config, variant(self.variant).core_for(self.config), self.data_dir,
                        self.broker, sink, clock, self.behaviour(), self.login, self.tls,
                        self.mqtt, self.session_expiry_s)
        host.tabs = dict(self.tabs)
        host.agents_by_bench = self.agents_by == "bench"
        return host

    def behaviour(self) -> Behaviour:
        """The simulator's model of agents and people: a task takes as long live as in
        simulation, streams the same tokens, and a person clicks at the same moment."""
        return Behaviour(workload_from_json(self.workload), self.seed)


def apply_op(host: LiveHost, op: dict[str, Any]) -> None:
    """Carry out one operation on a live node: a workload operation (bench.workload), or a
    client-side fault primitive (bench.faults.primitives) in its JSON form."""
    kind = op["op"]
    if kind in OP_KINDS:
        host.feed(op_input(op_from_json(op), host.now_ms()))
        return
    if kind in AGENT_OPS:
        host.feed(agent_input(op, host.now_ms()))
        return
    fault = FaultRef(*op["fault"]) if "fault" in op else None
    if kind == "keys":
        host.rotate_keys(keys_from_json(op))
    elif kind == "clock_skew":
        host.skew_ms = float(op["skew_ms"])
    elif fault is None:
        raise ValueError(f"operation {kind!r} needs its fault ([index, kind])")
    elif kind == "second_connection":
        host.second_connection(fault, bool(op["on"]), bool(op.get("overlapping", False)))
    elif kind == "client_id":
        host.use_client_id(fault, op["value"])
    elif kind == "strip_reply_node":
        host.strip_reply_node(fault, float(op["probability"]), int(op["seed"]))
    elif kind == "publish_failure":
        host.refuse_publishes(fault, float(op["probability"]), int(op["seed"]))
    else:
        raise ValueError(f"unknown live operation {kind!r}")


def keys_to_json(keys: KeyRing) -> dict[str, Any]:
    """A keyring for the control channel (stdin, never argv)."""
    return {"op": "keys", "flat": keys.flat_token.reveal().hex() if keys.flat_token else None,
            "agents": {k: v.reveal().hex() for k, v in keys.agent_keys.items()},
            "previous": {k: v.reveal().hex() for k, v in keys.previous.items()}}


def keys_from_json(op: dict[str, Any]) -> KeyRing:
    return KeyRing(Secret(bytes.fromhex(op["flat"])) if op.get("flat") else None,
                   {k: Secret(bytes.fromhex(v)) for k, v in op["agents"].items()},
                   {k: Secret(bytes.fromhex(v)) for k, v in op.get("previous", {}).items()})
