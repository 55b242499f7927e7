"""Roster (this node's executors) and directory (everyone's agents) — DESIGN §3.

`agentId` is a business identity `namespace.capability`; `nodeId` is where to deliver.
Resolution goes explicit targetNodeId → directory → UNDELIVERABLE with a reason, and never
falls back to a broadcast (seed 002 §5). An empty roster still registers the default
executor so the node is never a mute receiver (seed 000 §3.3 C3), and a namespace switch
rotates the persisted roster (seed 002 §3.1). No I/O.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from enum import StrEnum

from bench.core.config import namespace_of as namespace_of
from bench.core.envelope import Json
from bench.core.frozen import quick_init_module
from bench.core.inputs import ROSTER_DOCUMENT as ROSTER_DOCUMENT

DEFAULT_EXECUTOR_ID = "a2a-local-executor"
@dataclass(frozen=True, slots=True)
class AgentDescriptor:
    agent_id: str
    node_id: str
    role: str = "executor"
    online: bool = True

    def to_json(self) -> dict[str, Json]:
        return {"agentId": self.agent_id, "role": self.role}


class Route(StrEnum):
    """How an inbound toAgentId maps to one of this node's executors."""

    EXACT = "EXACT"                      # a roster executor with this agentId
    DEFAULT_EXECUTOR = "DEFAULT_EXECUTOR"  # same namespace, served by a2a-local-executor
    CROSS_NAMESPACE = "CROSS_NAMESPACE"  # another namespace: never "helpfully" executed
    UNKNOWN_AGENT = "UNKNOWN_AGENT"      # our namespace, but no executor for it


@dataclass(frozen=True, slots=True)
class Roster:
    """This node's executors. `default_executor` is True when the roster was empty."""

    node_id: str
    namespace: str
    agent_ids: tuple[str, ...]
    default_executor: bool

    @property
    def executor_ids(self) -> tuple[str, ...]:
        return self.agent_ids + ((DEFAULT_EXECUTOR_ID,) if self.default_executor else ())

    def route(self, to_agent_id: str) -> Route:
        if to_agent_id in self.agent_ids:
            return Route.EXACT
        if to_agent_id == DEFAULT_EXECUTOR_ID:
            return Route.DEFAULT_EXECUTOR if self.default_executor else Route.UNKNOWN_AGENT
        if namespace_of(to_agent_id) != self.namespace:
            return Route.CROSS_NAMESPACE
        return Route.DEFAULT_EXECUTOR if self.default_executor else Route.UNKNOWN_AGENT

    def can_handle(self, to_agent_id: str) -> bool:
        return self.route(to_agent_id) in (Route.EXACT, Route.DEFAULT_EXECUTOR)

    def to_document(self) -> dict[str, Json]:
        return {"version": 1, "namespace": self.namespace, "nodeId": self.node_id,
                "agents": list(self.agent_ids)}


@dataclass(frozen=True, slots=True)
class RosterLoad:
    """The roster built at start-up and what happened on the way (for the history)."""

    roster: Roster
    restored: tuple[str, ...]        # agentIds taken from the persisted roster
    rotated_from: str | None          # old namespace when a switch rotated the file
    rotated_agents: tuple[str, ...]
    problems: tuple[str, ...]


def load_roster(node_id: str, namespace: str, configured: tuple[str, ...],
                persisted: Json, *, rotate_on_switch: bool = True,
                register_default: bool = True) -> RosterLoad:
    """Configured executors plus the persisted roster, like the seed's start-up seeder.

    Every executor must be in the node's namespace: a foreign one is a configuration bug.
    A persisted roster of another namespace is rotated away (backed up by the caller);
    `rotate_on_switch=False` keeps it, which reproduces the stale-roster bug, and
    `register_default=False` leaves an empty roster empty (the mute receiver of C3).
    """
    for agent_id in configured:
        if namespace_of(agent_id) != namespace:
            raise ValueError(f"node {node_id}: executor {agent_id!r} is not in namespace {namespace!r}")
    problems: list[str] = []
    restored: list[str] = []
    rotated_from: str | None = None
    rotated: tuple[str, ...] = ()
    if persisted is not None:
        old_ns, old_agents, problem = _parse_roster(persisted)
        if problem:
            problems.append(problem)
        elif old_ns != namespace and rotate_on_switch:
            rotated_from, rotated = old_ns, old_agents
        else:
            restored = [a for a in old_agents if a not in configured]
    agents = tuple(configured) + tuple(restored)
    roster = Roster(node_id, namespace, agents, default_executor=register_default and not agents)
    return RosterLoad(roster, tuple(restored), rotated_from, rotated, tuple(problems))


def _parse_roster(doc: Json) -> tuple[str, tuple[str, ...], str | None]:
    if not isinstance(doc, dict):
        return "", (), "roster document is not an object"
    ns = doc.get("namespace")
    agents = doc.get("agents")
    if not isinstance(ns, str) or not isinstance(agents, list) or \
            not all(isinstance(a, str) and a for a in agents):
        return "", (), "roster document needs a 'namespace' string and an 'agents' list of strings"
    return ns, tuple(a for a in agents if isinstance(a, str)), None


# --- the directory: who serves which agent, from retained announcements ---------------

@dataclass(frozen=True, slots=True)
class Announcement:
    node_id: str
    online: bool
    namespace: str | None
    agents: tuple[AgentDescriptor, ...]

    def to_json(self) -> dict[str, Json]:
        return {"nodeId": self.node_id, "online": self.online, "namespace": self.namespace,
                "agents": [a.to_json() for a in self.agents]}


def announcement_for(roster: Roster, online: bool = True) -> Announcement:
    agents = tuple(AgentDescriptor(a, roster.node_id) for a in roster.executor_ids)
    return Announcement(roster.node_id, online, roster.namespace, agents if online else ())


@functools.lru_cache(maxsize=4096)
def read_announcement(payload: bytes, topic_node_id: str) -> Announcement | str:
    """The announcement a retained payload carries, or the reason it carries none. A pure
    function of its arguments, and an announcement is frozen: where nodes share a process
    (the simulator) one parse serves every node that takes in the same announcement — a
    global directory delivers each to all N nodes, N² in all."""
    try:
        raw: object = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return f"not JSON: {exc}"[:200]
    return parse_announcement(raw, topic_node_id)


def parse_announcement(raw: object, topic_node_id: str) -> Announcement | str:
    """An announcement, or a string saying why not (recorded by the node)."""
    if not isinstance(raw, dict):
        return "announcement is not a JSON object"
    node_id = raw.get("nodeId")
    if node_id != topic_node_id:
        return f"announcement nodeId {node_id!r} does not match its topic ({topic_node_id!r})"
    online = raw.get("online")
    if not isinstance(online, bool):
        return "announcement 'online' must be a boolean"
    ns = raw.get("namespace")
    if ns is not None and not isinstance(ns, str):
        return "announcement 'namespace' must be a string or null"
    agents_raw = raw.get("agents", [])
    if not isinstance(agents_raw, list):
        return "announcement 'agents' must be a list"
    agents: list[AgentDescriptor] = []
    for i, a in enumerate(agents_raw):
        if not isinstance(a, dict) or not isinstance(a.get("agentId"), str) or not a["agentId"]:
            return f"announcement agents[{i}] needs an 'agentId' string"
        role = a.get("role", "executor")
        agents.append(AgentDescriptor(a["agentId"], topic_node_id,
                                      role if isinstance(role, str) else "executor", online))
    return Announcement(topic_node_id, online, ns, tuple(agents))


class Resolution(StrEnum):
    EXPLICIT = "EXPLICIT"
    DIRECTORY = "DIRECTORY"
    UNRESOLVED = "UNRESOLVED"


@dataclass(frozen=True, slots=True)
class Target:
    how: Resolution
    node_id: str | None
    reason: str


class Directory:
    """agentId -> descriptor, built from nodes' announcements (the node's own included)."""

    def __init__(self) -> None:
        self._by_node: dict[str, Announcement] = {}
        # agentId -> nodes announcing it: nearly always one, and a tuple of one is a fifth
        # of a set (a global directory holds N of these on each of N nodes)
        self._announcers: dict[str, tuple[str, ...]] = {}
        self._by_agent: dict[str, AgentDescriptor] = {}
        # agentId -> the node that announced it online and then went offline (its will, which
        # lists no agents: W-DIR-2), until some node announces that agent online again
        self._went_offline: dict[str, str] = {}

    def apply(self, ann: Announcement) -> None:
        old = self._by_node.get(ann.node_id)
        self._by_node[ann.node_id] = ann
        if old is not None and old.online and not ann.online:
            for a in old.agents:
                self._went_offline[a.agent_id] = ann.node_id
        if ann.online and self._went_offline:
            for a in ann.agents:
                self._went_offline.pop(a.agent_id, None)
        self._reindex(ann.node_id, old, ann)

    def remove(self, node_id: str) -> bool:
        old = self._by_node.pop(node_id, None)
        if old is not None:
            self._reindex(node_id, old, None)
        if self._went_offline:
            self._went_offline = {a: n for a, n in self._went_offline.items() if n != node_id}
        return old is not None

    def _reindex(self, node_id: str, old: Announcement | None, new: Announcement | None) -> None:
        """Recompute the winner of every agent the change touches (not the whole index)."""
        if old is new:
            return    # the same announcement again (parsed once, shared): nothing changes
        if old is None and new is not None \
                and not any(d.agent_id in self._announcers for d in new.agents):
            # a node first heard of, announcing agents nobody else does (a directory filling
            # up: N of these on each of N nodes): each agent's one announcer is its winner
            for desc in new.agents:
                if desc.agent_id in self._announcers:
                    continue      # listed twice: its first listing is the one that counts
                self._announcers[desc.agent_id] = (node_id,)
                if desc.node_id != node_id or desc.online != new.online:   # not as parsed
                    desc = AgentDescriptor(desc.agent_id, node_id, desc.role, new.online)
                self._by_agent[desc.agent_id] = desc
            return
        touched = {a.agent_id for a in old.agents} if old else set()
        for agent in touched:
            self._announcers[agent] = tuple(n for n in self._announcers[agent] if n != node_id)
        if new is not None:
            for desc in new.agents:
                have = self._announcers.get(desc.agent_id, ())
                if node_id not in have:
                    self._announcers[desc.agent_id] = (*have, node_id)
                touched.add(desc.agent_id)
        for agent in touched:
            nodes = self._announcers.get(agent)
            if not nodes:
                self._announcers.pop(agent, None)
                self._by_agent.pop(agent, None)
                continue
            # Online announcers win over offline ones; among equals the later node id wins.
            winner = max(nodes, key=lambda n: (self._by_node[n].online, n))
            ann = self._by_node[winner]
            desc = next(d for d in ann.agents if d.agent_id == agent)
            if desc.node_id != winner or desc.online != ann.online:   # not as parsed
                desc = AgentDescriptor(agent, winner, desc.role, ann.online)
            self._by_agent[agent] = desc

    def find(self, agent_id: str) -> AgentDescriptor | None:
        return self._by_agent.get(agent_id)

    def nodes(self) -> dict[str, bool]:
        return {n: a.online for n, a in self._by_node.items()}

    def __len__(self) -> int:
        return len(self._by_agent)

    def resolve(self, to_agent_id: str | None, target_node_id: str | None) -> Target:
        """Explicit targetNodeId, else the directory, else UNRESOLVED with the reason."""
        if target_node_id:
            return Target(Resolution.EXPLICIT, target_node_id, "explicit targetNodeId")
        if not to_agent_id:
            return Target(Resolution.UNRESOLVED, None, "no targetNodeId and no toAgentId")
        desc = self.find(to_agent_id)
        if desc is None:
            return Target(Resolution.UNRESOLVED, None,
                          f"agent {to_agent_id!r} is in no directory entry "
                          f"({len(self._by_agent)} agents known)")
        if desc.online:
            return Target(Resolution.DIRECTORY, desc.node_id, "directory")
        went = self._went_offline.get(to_agent_id)
        if went is not None and went != desc.node_id:
            # the node seen hosting it went offline; what is left is an offline entry never
            # seen online here — a gone node's retained announcement (a ghost), whose inbox
            # nobody reads: queueing there loses the request, so say so instead (W-DIR-5)
            return Target(Resolution.UNRESOLVED, None,
                          f"agent {to_agent_id!r}: its node {went!r} announced itself offline, "
                          f"and {desc.node_id!r} lists it only offline, never seen online")
        return Target(Resolution.DIRECTORY, desc.node_id,
                      "directory (node announced offline; the broker will queue it)")


# built per message many times over: see bench.core.frozen
quick_init_module(globals())
