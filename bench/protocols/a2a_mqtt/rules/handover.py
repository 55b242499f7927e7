"""A2A over MQTT, task handover (`a2a_handover`, user story 07)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from bench.checks import Checker, Collector, rule
from bench.checks.network import LINK_FAULTS, Transit, fault_windows, held_until
from bench.core.events import (
    A2mAttempt,
    A2mReplyTaken,
    A2mRequestTaken,
    Intake,
)
from bench.history import History
from bench.protocols.a2a_mqtt import SPEC
from bench.protocols.a2a_mqtt.rules.common import _agent_of, _reply_topics, answers, intake

# -- task handover (user story 07) -----------------------------------------------------------------
#: Faults that refuse or alter what a node publishes on its way to the broker
PUBLISH_FAULTS = frozenset({"puback_refused", "property_tampering"})


#: How long a request a card owner sent on may take to reach its delegate, on a link no
#: fault slowed: a delegate that took other requests in later than that, and not this one,
#: lost it (a broker hop, two group commits and a busy event loop are well under it).
HANDOVER_REACH_MS = 5_000.0


def _direct_agent(topic: str) -> str | None:
    """The agent a direct request topic names: `$a2a/v1/request/{org}/{unit}/{agent}`."""
    parts = topic.split("/")
    if len(parts) == 6 and parts[:3] == ["$a2a", "v1", "request"]:
        return parts[5]
    return None


@dataclass(frozen=True, slots=True)
class FromAnother:
    """A reply a requester took for a request it sent to one agent's direct topic, when the
    correlation was answered by another agent (a task handed over): who was asked, who
    answered."""

    taken: A2mReplyTaken
    asked: str
    by: str


def _from_another(h: History) -> tuple[list[FromAnother], int]:
    """The replies taken that another agent than the one asked published; and how many
    taken replies' correlations several agents answered (whose reply each was is unknown)."""
    agent_of: dict[str, str] = h.memo(_agent_of)
    reply_topics = h.memo(_reply_topics)
    asked_of: dict[tuple[str, str], str] = {}
    for a in h.of(A2mAttempt):
        agent = _direct_agent(a.topic)
        if agent is not None and a.correlation is not None:
            for topic in reply_topics[a.node]:
                asked_of[(topic, a.correlation)] = agent
    publishers: dict[tuple[str, str], set[str]] = defaultdict(set)
    for x in h.memo(answers):
        if x.correlation is not None:
            publishers[(x.topic, x.correlation)].add(agent_of.get(x.node, x.node))
    out, several = [], 0
    for r in h.of(A2mReplyTaken):
        key = (r.topic, r.correlation or "")
        asked = asked_of.get(key)
        by = publishers.get(key, set())
        if asked is None or not by - {asked}:
            continue
        if len(by) > 1:
            several += 1
            continue
        out.append(FromAnother(r, asked, next(iter(by))))
    return out, several


@rule("A2M-HAND-1: a reply from another agent than the one asked — the task was handed over "
      "— names that agent in a2a-responder-agent-id")
def handed_over_replies_name_their_agent(h: History, c: Collector) -> None:
    """Every reply a requester took for a request it sent to one agent's direct topic, that
    another agent published (the card owner handed the task over to it), carries User
    Property a2a-responder-agent-id naming the agent that published it: without it the
    requester keeps sending the task's follow-ups to the card owner; naming another, it
    sends them where the task is not. A correlation several agents answered is not
    judged (counted)."""
    found, several = h.memo(_from_another)
    c.count("correlations_answered_by_several_agents", several)
    for x in found:
        c.count("replies_from_another_agent")
        named = x.taken.responder_agent_id
        if named != x.by:
            c.violation(f"{x.taken.node} asked {x.asked} and took a reply {x.by} published "
                        + ("naming no responder" if named is None else f"naming {named}")
                        + f" (a2a-responder-agent-id should say {x.by})", x.taken)


@rule("A2M-HAND-1, A2M-RR-3: a request handed over reaches the agent it was handed to with "
      "its Response Topic and Correlation Data")
def handed_over_requests_reach_their_agent(h: History, c: Collector) -> None:
    """Each request a card owner recorded handing over (intake HANDED_OVER) is taken in by
    the agent it names with the same Response Topic and Correlation Data: that agent
    answers the requester on them. A forward that loses either — rebuilt from the payload,
    its properties dropped — answers nobody. Judged where the delegate took other requests
    in more than HANDOVER_REACH_MS later, and neither a crash of the card owner right after
    (its forward may have died with it; the requester's retry is sent on again) nor a
    link fault on either side held it back, nor a fault refused or altered the card owner's
    publishes meanwhile (its broker refusing the forward: the requester's retry recovers
    it), nor the network's account explains the loss (delivery.Transit: a broker restarted
    without persistence forwards to no delegate until it subscribes again); else
    undecided (counted)."""
    node_of = {agent: node for node, agent in h.memo(_agent_of).items()}
    took = h.memo(intake)
    reached: dict[str, set[tuple[str | None, str | None]]] = defaultdict(set)
    later: dict[str, list[float]] = defaultdict(list)
    for t in took:
        reached[t.node].add((t.response_topic, t.correlation))
        later[t.node].append(t.t_ms)
    transit = h.memo(Transit)
    crashes = transit.crashes
    windows = [w for w in h.memo(fault_windows) if w.fault in LINK_FAULTS | PUBLISH_FAULTS]

    # (a lossy link holds what is sent after its heal behind what it is still retransmitting:
    # explore, seed 15 run 213, a forward 146 ms after the heal)
    for ho in h.of(A2mRequestTaken):
        if ho.intake is not Intake.HANDED_OVER or ho.handed_to is None:
            continue
        c.count("handed_over")
        to = node_of.get(ho.handed_to)
        if to is not None and (ho.response_topic, ho.correlation) in reached[to]:
            continue
        due = ho.t_ms + HANDOVER_REACH_MS
        if to is None or not any(x > due for x in later[to]) \
                or any(ho.t_ms <= x <= due for x in crashes[ho.node]) \
                or any(n in (ho.node, to) and w.start_ms <= due
                       and held_until(h, w, n) >= ho.t_ms for w in windows for n in w.nodes):
            c.count("handovers_undecided")
            continue
        if (why := transit.lost(ho.node, ho.t_ms, to)) is not None:
            c.count(f"handover_{why}")
            continue
        c.violation(f"{ho.node} handed request {ho.correlation} (task {ho.task_id}) over to "
                    f"{ho.handed_to}, which took requests in until {max(later[to]) / 1000:.1f} s "
                    "but never this one with its Response Topic and Correlation Data", ho)


def _no_handover(h: History) -> str | None:
    found, several = h.memo(_from_another)
    if found or several or any(t.intake is Intake.HANDED_OVER for t in h.of(A2mRequestTaken)):
        return None
    return ("no task was handed over: no reply came from another agent than the one asked "
            "(a topology's hands_over_to makes a card owner hand its tasks over)")


A2A_HANDOVER = Checker(
    "a2a_handover", "A2A over MQTT, task handover: a card owner's delegate names itself on "
    "every reply to a task handed to it, and what was handed over reaches it with its reply "
    "path (the requester's side, follow-ups to the named agent, is a2a_requests').",
    (handed_over_replies_name_their_agent, handed_over_requests_reach_their_agent),
    _no_handover, protocols=frozenset({SPEC.name}))
