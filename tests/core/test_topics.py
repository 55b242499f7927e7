from __future__ import annotations

import pytest

from bench.core.topics import TopicError, TopicKind, Topics
from bench.substrates.filters import matches


def test_default_prefix_strings() -> None:
    t = Topics()
    assert t.inbox("n1") == "ooder/node/n1/inbox"
    assert t.group("g1") == "ooder/event/A2A/g1"
    assert t.directory("n1") == "ooder/directory/n1"
    assert t.directory_filter() == "ooder/directory/+"


def test_configurable_prefix_applies_everywhere() -> None:
    t = Topics("acme/a2a")
    for topic in (t.inbox("n"), t.group("g"), t.directory("n"), t.directory_filter()):
        assert topic.startswith("acme/a2a/")


@pytest.mark.parametrize("bad", ["", "a/b", "a+", "#", "x\x00"])
def test_bad_segments_raise(bad: str) -> None:
    with pytest.raises(TopicError):
        Topics().inbox(bad)


@pytest.mark.parametrize("prefix", ["", "/ooder", "$SYS", "ooder/", "a//b", "a/+"])
def test_bad_prefix_raises(prefix: str) -> None:
    with pytest.raises(TopicError):
        Topics(prefix)


def test_parse_round_trips_every_topic_the_module_makes() -> None:
    t = Topics("p")
    assert t.parse(t.inbox("n1")).kind is TopicKind.INBOX
    assert t.parse(t.inbox("n1")).key == "n1"
    assert t.parse(t.group("g")).key == "g"
    assert t.parse(t.directory("n2")).kind is TopicKind.DIRECTORY
    # the seed's drifted prefixes are foreign, not silently accepted
    assert t.parse("p/user/n1/inbox").kind is TopicKind.FOREIGN
    assert t.parse("p/p2p/n1/inbox").kind is TopicKind.FOREIGN
    assert t.parse("ooder/node/n1/inbox").kind is TopicKind.FOREIGN


def test_subscription_filters_match_the_publish_topics() -> None:
    """Seed 000 §3.1: the subscribed filter and the published topic must agree."""
    t = Topics()
    assert matches(t.directory_filter(), t.directory("exec-9"))
    assert not matches(t.directory_filter(), t.inbox("exec-9"))


@pytest.mark.parametrize("flt, topic, expected", [
    ("a/b", "a/b", True), ("a/+", "a/b", True), ("a/+", "a/b/c", False),
    ("a/#", "a", True), ("a/#", "a/b/c", True), ("#", "a/b", True), ("+/+", "a/b", True),
    ("+", "$SYS", False), ("#", "$SYS/x", False), ("$SYS/#", "$SYS/x", True),
    ("a/b", "a/c", False), ("a/+/c", "a/b/c", True), ("a/b/c", "a/b", False),
])
def test_mqtt_matching(flt: str, topic: str, expected: bool) -> None:
    assert matches(flt, topic) is expected
