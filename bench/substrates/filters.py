"""MQTT 3.1.1 §4.7 topic filter matching, as a broker does it: for the simulator's broker
and the back-to-back driver. Not node code: a node routes by topic *name*
(`bench.core.topics.Topics.parse`) and never matches a filter, so this lives with the
substrates, outside the core that the mutation harness measures."""

from __future__ import annotations


def matches(topic_filter: str, topic: str) -> bool:
    """MQTT 3.1.1 §4.7 matching of a topic name against a filter (`+`, `#`, `$` rule)."""
    f_parts = topic_filter.split("/")
    t_parts = topic.split("/")
    if topic.startswith("$") and f_parts[0] in ("+", "#"):
        return False
    for i, fp in enumerate(f_parts):
        if fp == "#":
            return True
        if i >= len(t_parts):
            return False
        if fp != "+" and fp != t_parts[i]:
            return False
    return len(f_parts) == len(t_parts)


class FilterTree:
    """Topic filters by their levels, for finding those a topic matches without trying each
    (`matches`): the simulated broker routes every topic it has not routed since its
    subscriptions last changed, and at 100,000 nodes (1,000 namespaces, a directory filter
    each) a scan of every wildcard filter per route was a good part of the run. Gives the
    filters `matches` would accept, no more: a filter is kept under its levels up to its
    first `#`, which matches whatever follows (as `matches` has it); `+` and `#` at the first
    level never match a `$` topic."""

    __slots__ = ("_root",)

    def __init__(self) -> None:
        self._root = _Level()

    def add(self, topic_filter: str) -> None:
        level = self._root
        for part in topic_filter.split("/"):
            if part == "#":
                level.rest.add(topic_filter)
                return
            level = level.children.setdefault(part, _Level())
        level.ends.add(topic_filter)

    def discard(self, topic_filter: str) -> None:
        path: list[tuple[_Level, str]] = []
        level = self._root
        for part in topic_filter.split("/"):
            if part == "#":
                level.rest.discard(topic_filter)
                break
            child = level.children.get(part)
            if child is None:
                return
            path.append((level, part))
            level = child
        else:
            level.ends.discard(topic_filter)
        for parent, part in reversed(path):     # prune the levels left empty
            child = parent.children[part]
            if child.children or child.ends or child.rest:
                break
            del parent.children[part]

    def matching(self, topic: str) -> list[str]:
        """The filters that match `topic`."""
        parts = topic.split("/")
        found: list[str] = []
        dollar = topic.startswith("$")
        levels = [self._root]
        for i, part in enumerate(parts):
            below: list[_Level] = []
            for level in levels:
                if level.rest and not (dollar and i == 0):
                    found.extend(level.rest)
                child = level.children.get(part)
                if child is not None:
                    below.append(child)
                if part != "+" and not (dollar and i == 0):
                    plus = level.children.get("+")
                    if plus is not None:
                        below.append(plus)
            levels = below
            if not levels:
                return found
        for level in levels:          # every level of the topic matched
            found.extend(level.ends)
            found.extend(level.rest)  # `a/#` matches `a` too
        return found


class _Level:
    __slots__ = ("children", "ends", "rest")

    def __init__(self) -> None:
        self.children: dict[str, _Level] = {}
        self.ends: set[str] = set()      # filters with no more levels
        self.rest: set[str] = set()      # filters whose next level is `#`
