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
