from __future__ import annotations

import pytest

from bench.protocols.seed.directory import (
    DEFAULT_EXECUTOR_ID,
    AgentDescriptor,
    Announcement,
    Directory,
    Resolution,
    Route,
    announcement_for,
    load_roster,
    namespace_of,
    parse_announcement,
)


def test_namespace_of() -> None:
    assert namespace_of("fin.tax") == "fin"
    assert namespace_of("llm.invoice-recon") == "llm"
    assert namespace_of(DEFAULT_EXECUTOR_ID) is None
    assert namespace_of(".x") is None and namespace_of("x.") is None


def test_empty_roster_registers_the_default_executor() -> None:
    loaded = load_roster("n1", "llm", (), None)
    assert loaded.roster.default_executor
    assert loaded.roster.executor_ids == (DEFAULT_EXECUTOR_ID,)
    # it serves its own namespace (the node is never a mute receiver) ...
    assert loaded.roster.route("llm.anything") is Route.DEFAULT_EXECUTOR
    assert loaded.roster.can_handle(DEFAULT_EXECUTOR_ID)
    # ... and still never another namespace
    assert loaded.roster.route("fin.tax") is Route.CROSS_NAMESPACE


def test_can_handle_never_crosses_namespace() -> None:
    roster = load_roster("n1", "llm", ("llm.tax",), None).roster
    assert roster.route("llm.tax") is Route.EXACT
    assert roster.route("fin.tax") is Route.CROSS_NAMESPACE
    assert roster.route("llm.other") is Route.UNKNOWN_AGENT
    assert not roster.can_handle("fin.tax")
    assert not roster.default_executor


def test_foreign_configured_executor_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="not in namespace"):
        load_roster("n1", "llm", ("fin.tax",), None)


def test_persisted_roster_is_restored() -> None:
    doc = {"version": 1, "namespace": "llm", "agents": ["llm.tax", "llm.invoice"]}
    loaded = load_roster("n1", "llm", ("llm.tax",), doc)
    assert loaded.roster.agent_ids == ("llm.tax", "llm.invoice")
    assert loaded.restored == ("llm.invoice",)
    assert loaded.rotated_from is None


def test_namespace_switch_rotates_the_roster() -> None:
    doc = {"version": 1, "namespace": "fin", "agents": ["fin.tax", "fin.invoice"]}
    loaded = load_roster("n1", "llm", ("llm.tax",), doc)
    assert loaded.rotated_from == "fin"
    assert loaded.rotated_agents == ("fin.tax", "fin.invoice")
    assert loaded.roster.agent_ids == ("llm.tax",)


def test_without_rotation_two_sets_of_executors_appear() -> None:
    """The seed's stale-roster bug, reproducible by turning rotation off."""
    doc = {"version": 1, "namespace": "fin", "agents": ["fin.tax"]}
    loaded = load_roster("n1", "llm", ("llm.tax",), doc, rotate_on_switch=False)
    assert set(loaded.roster.agent_ids) == {"llm.tax", "fin.tax"}


@pytest.mark.parametrize("doc", [[], {"namespace": 3, "agents": []}, {"namespace": "x", "agents": [1]}])
def test_damaged_roster_is_a_problem_not_a_crash(doc: object) -> None:
    loaded = load_roster("n1", "llm", ("llm.tax",), doc)  # type: ignore[arg-type]
    assert loaded.problems and loaded.roster.agent_ids == ("llm.tax",)


def test_resolution_order_and_no_broadcast_fallback() -> None:
    d = Directory()
    d.apply(Announcement("exec-1", True, "llm", (AgentDescriptor("llm.tax", "exec-1"),)))
    assert d.resolve("llm.tax", "exec-7").node_id == "exec-7"        # explicit wins
    assert d.resolve("llm.tax", "exec-7").how is Resolution.EXPLICIT
    target = d.resolve("llm.tax", None)
    assert (target.how, target.node_id) == (Resolution.DIRECTORY, "exec-1")
    missing = d.resolve("llm.nobody", None)
    assert missing.how is Resolution.UNRESOLVED and missing.node_id is None
    assert "llm.nobody" in missing.reason
    assert d.resolve(None, None).how is Resolution.UNRESOLVED


def test_online_announcer_wins_and_offline_is_noted() -> None:
    d = Directory()
    d.apply(Announcement("a", False, "llm", (AgentDescriptor("llm.tax", "a"),)))
    assert "offline" in d.resolve("llm.tax", None).reason
    d.apply(Announcement("b", True, "llm", (AgentDescriptor("llm.tax", "b"),)))
    assert d.resolve("llm.tax", None).node_id == "b"


def test_announcement_round_trip_and_validation() -> None:
    roster = load_roster("n1", "llm", (), None).roster
    ann = announcement_for(roster)
    parsed = parse_announcement(ann.to_json(), "n1")
    assert isinstance(parsed, Announcement)
    assert [a.agent_id for a in parsed.agents] == [DEFAULT_EXECUTOR_ID]
    assert isinstance(parse_announcement(ann.to_json(), "other"), str)  # topic mismatch
    assert isinstance(parse_announcement({"nodeId": "n1", "online": "yes"}, "n1"), str)
    assert isinstance(parse_announcement([], "n1"), str)
