"""The single owner of every MQTT topic string and filter (DESIGN §3, seed 000 §3.1).

A subscribe/publish prefix mismatch once lost messages silently; so no other module
formats a topic. No I/O. (Filter matching is the broker's: `bench.substrates.filters`.)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum

DEFAULT_PREFIX = "ooder"


class TopicError(ValueError):
    """A topic segment that would not round-trip (bad configuration or a bug, so it raises)."""


class TopicKind(StrEnum):
    INBOX = "inbox"
    GROUP = "group"
    DIRECTORY = "directory"
    FOREIGN = "foreign"


@dataclass(frozen=True, slots=True)
class ParsedTopic:
    kind: TopicKind
    key: str | None  # the nodeId or sceneGroupId the topic is about


def _segment(what: str, value: str) -> str:
    if not value or any(c in value for c in "/+#\x00"):
        raise TopicError(f"{what} {value!r} cannot be an MQTT topic segment "
                         "(empty, or contains '/', '+', '#' or NUL)")
    return value


@dataclass(frozen=True, slots=True)
class Topics:
    """Topic strings under one prefix (default `ooder`)."""

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not self.prefix or self.prefix.startswith(("/", "$")) or self.prefix.endswith("/"):
            raise TopicError(f"topic prefix {self.prefix!r} must be non-empty and not start with "
                             "'/' or '$' nor end with '/'")
        for part in self.prefix.split("/"):
            _segment("topic prefix part", part)

    def inbox(self, node_id: str) -> str:
        return f"{self.prefix}/node/{_segment('nodeId', node_id)}/inbox"

    def node_subtree(self, node_id: str) -> str:
        """Everything under one node's level: a filter that overlaps its inbox (only the
        double_subscription fault subscribes it)."""
        return f"{self.prefix}/node/{_segment('nodeId', node_id)}/#"

    def inbox_filter(self) -> str:
        """Every node's inbox (an observer on the broker: an attacker, a replayer)."""
        return f"{self.prefix}/node/+/inbox"

    def group(self, scene_group_id: str) -> str:
        return f"{self.prefix}/event/A2A/{_segment('sceneGroupId', scene_group_id)}"

    def directory(self, node_id: str, namespace: str | None = None) -> str:
        """A node's announcement: one level for every node, or — in a directory scoped by
        namespace — under its namespace's level."""
        if namespace is None:
            return f"{self.prefix}/directory/{_segment('nodeId', node_id)}"
        return f"{self.prefix}/directory/{_segment('namespace', namespace)}/" \
            f"{_segment('nodeId', node_id)}"

    def directory_filter(self, namespace: str | None = None) -> str:
        """Every node's announcement, or every one of one namespace."""
        if namespace is None:
            return f"{self.prefix}/directory/+"
        return f"{self.prefix}/directory/{_segment('namespace', namespace)}/+"

    def parse(self, topic: str) -> ParsedTopic:
        return _parse(self.prefix, topic)


@functools.lru_cache(maxsize=65_536)
def _parse(prefix: str, topic: str) -> ParsedTopic:
    """What `topic` is under `prefix`. A pure function of its arguments, and a ParsedTopic
    is frozen: the nodes of a process share one answer for each topic (a global directory
    has every node parse every node's announcement topic)."""
    head = prefix + "/"
    if not topic.startswith(head):
        return ParsedTopic(TopicKind.FOREIGN, None)
    parts = topic[len(head):].split("/")
    if len(parts) == 3 and parts[0] == "node" and parts[2] == "inbox" and parts[1]:
        return ParsedTopic(TopicKind.INBOX, parts[1])
    if len(parts) == 3 and parts[0] == "event" and parts[1] == "A2A" and parts[2]:
        return ParsedTopic(TopicKind.GROUP, parts[2])
    if len(parts) == 2 and parts[0] == "directory" and parts[1]:
        return ParsedTopic(TopicKind.DIRECTORY, parts[1])
    if len(parts) == 3 and parts[0] == "directory" and parts[1] and parts[2]:
        return ParsedTopic(TopicKind.DIRECTORY, parts[2])    # scoped by namespace
    return ParsedTopic(TopicKind.FOREIGN, None)
