"""A node's configuration: a value, validated on construction (bad config raises)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from bench.core.auth import AuthConfig
from bench.core.topics import DEFAULT_PREFIX, Topics


def namespace_of(agent_id: str) -> str | None:
    """`fin.tax` -> `fin`; an id without a dot has no namespace."""
    head, dot, tail = agent_id.partition(".")
    return head if dot and head and tail else None


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    ttl_ms: int = 24 * 3600 * 1000
    cap: int = 20_000
    flush_interval_ms: int = 5_000
    durable: bool = True  # False: an in-memory window, lost on restart (the seed's 60 s bug)

    def __post_init__(self) -> None:
        if self.ttl_ms <= 0 or self.cap <= 0 or self.flush_interval_ms <= 0:
            raise ValueError(f"ledger ttl_ms, cap and flush_interval_ms must be > 0: {self}")


@dataclass(frozen=True, slots=True)
class OAuth:
    """OAuth 2.0 bearer tokens on requests (A2M-REQ-5, A2M-RSP-7): the bench plays the
    authorization server. A responder requires a token of `issuer` for `audience` (its
    unit, `a2a://{org}/{unit}`) with `scope`, checks it with the server's public key
    (Ed25519), and refuses a request without one; a requester holds the server's signing
    seed (`signing_seed`: token acquisition is out of band, A2M OAuth 1) and mints a token
    of `ttl_s` seconds for its requests, a fresh one when the last is near its end."""

    issuer: str
    audience: str
    scope: str
    ttl_s: int
    public_key: bytes
    signing_seed: bytes | None = None   # requesters only; never written to a file

    @staticmethod
    def of_run(run_seed: int, org: str, unit: str, *, signer: bool, issuer: str, scope: str,
               ttl_s: int) -> OAuth:
        """An agent's settings in a run whose tokens are for its unit: a requester
        (`signer`) holds the server's seed to mint with, a responder only its public key.
        The seed comes from the run's seed, as every key of the run (never written)."""
        seed = hashlib.sha256(f"a2a-bench idp {run_seed}".encode()).digest()
        public = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(
            Encoding.Raw, PublicFormat.Raw)
        return OAuth(issuer, OAuth.audience_of(org, unit), scope, ttl_s, public,
                     seed if signer else None)

    @staticmethod
    def audience_of(org: str, unit: str) -> str:
        """Whom a token is for: the responders of one unit."""
        return f"a2a://{org}/{unit}"

    def to_json(self) -> dict[str, object]:
        return {"issuer": self.issuer, "audience": self.audience, "scope": self.scope,
                "ttl_s": self.ttl_s, "public_key": self.public_key.hex(),
                **({"signing_seed": self.signing_seed.hex()} if self.signing_seed else {})}

    @staticmethod
    def from_json(raw: dict[str, object]) -> OAuth:
        seed = raw.get("signing_seed")
        return OAuth(str(raw["issuer"]), str(raw["audience"]), str(raw["scope"]),
                     int(str(raw["ttl_s"])), bytes.fromhex(str(raw["public_key"])),
                     bytes.fromhex(seed) if isinstance(seed, str) else None)


@dataclass(frozen=True, slots=True)
class A2aAgent:
    """What makes a node an agent of the A2A-over-MQTT profile (bench/protocols/a2a_mqtt/)
    rather than a seed-protocol node: its org (its unit is the node's namespace, its
    agent id its one agent), which side it plays, and the pool it serves, if any."""

    org_id: str
    responder: bool
    pool_id: str | None = None
    #: a requester's Message Expiry Interval on its requests (None: it sets none)
    request_expiry_s: int | None = None
    #: bearer tokens on requests (None: none required, none sent)
    oauth: OAuth | None = None
    #: a responder that owns its card and hands every new task over to this agent of its
    #: unit (A2M-HAND-1; None: it serves its tasks itself)
    hands_over_to: str | None = None
    #: a responder serving the tasks another hands over to it: its replies name it
    delegate: bool = False
    #: a requester's reply topic suffix (A2M-SESS-4: collision resistant), drawn by the
    #: deployment from the run's entropy; the same across the node's restarts (its
    #: persistent session keeps the topic). None: `r-{node id}` (a test's requester)
    reply_suffix: str | None = None
    #: a pool's only member subscribing the pool's topic itself (False), or through the
    #: pool's shared subscription
    pool_shared: bool = True
    #: a responder's bound on the tasks it runs at once (-32004 beyond it; None: none)
    capacity: int | None = None


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: str
    namespace: str
    agents: tuple[str, ...] = ()
    scene_groups: tuple[str, ...] = ()
    client_id: str = ""            # empty: the node id
    prefix: str = DEFAULT_PREFIX
    auth: AuthConfig = field(default_factory=AuthConfig)
    ledger: LedgerConfig = field(default_factory=LedgerConfig)
    task_timeout_ms: int = 60_000
    request_timeout_ms: int = 30_000
    qos: int = 1
    #: the namespaces whose directory this node reads; empty: every node's (the default).
    #: A scoped node announces under its own namespace's level (`Topics.directory`)
    directory_scope: tuple[str, ...] = ()
    #: set: an A2A-over-MQTT agent, not a seed-protocol node
    a2a: A2aAgent | None = None
    #: what its protocol's deployment gives the node beyond these fields (`deploy.
    #: node_fields`), handed to a node process as its launch spec's `node.settings`
    settings: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        topics = Topics(self.prefix)  # validates the prefix
        topics.inbox(self.node_id)    # validates the node id as a topic segment
        for group in self.scene_groups:
            topics.group(group)
        if not self.namespace or "." in self.namespace:
            raise ValueError(f"node {self.node_id}: namespace {self.namespace!r} must be "
                             "non-empty and contain no '.'")
        for agent in self.agents:
            if namespace_of(agent) != self.namespace:
                raise ValueError(f"node {self.node_id}: agent {agent!r} is not "
                                 f"'{self.namespace}.<capability>'")
        if self.qos not in (0, 1):
            raise ValueError(f"node {self.node_id}: qos={self.qos} must be 0 or 1")
        if self.task_timeout_ms <= 0 or self.request_timeout_ms <= 0:
            raise ValueError(f"node {self.node_id}: timeouts must be > 0")
        if self.directory_scope and self.namespace not in self.directory_scope:
            raise ValueError(f"node {self.node_id}: a scoped directory must include the node's "
                             f"own namespace {self.namespace!r}, got {list(self.directory_scope)}")
        for ns in self.directory_scope:
            topics.directory_filter(ns)
        if self.a2a is not None and len(self.agents) != 1:
            raise ValueError(f"node {self.node_id}: an A2A-over-MQTT agent has one agent id, "
                             f"got {list(self.agents)}")

    @property
    def directory_topic(self) -> str:
        """Where this node's retained announcement lives."""
        return Topics(self.prefix).directory(self.node_id,
                                             self.namespace if self.directory_scope else None)

    @property
    def directory_filters(self) -> tuple[str, ...]:
        """What this node subscribes to for the directory."""
        topics = Topics(self.prefix)
        if not self.directory_scope:
            return (topics.directory_filter(),)
        return tuple(topics.directory_filter(ns) for ns in self.directory_scope)

    @property
    def effective_client_id(self) -> str:
        return self.client_id or self.node_id

    @property
    def topics(self) -> Topics:
        return Topics(self.prefix)
