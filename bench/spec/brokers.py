"""What the simulator assumes of the MQTT layer, in one place, read by every substrate.

- `CLIENT`: how a node's MQTT client keeps its connection: the keepalive it asks for, how
  long it waits between reconnect attempts, how long a connect may go unanswered. The
  live nodes configure paho from it; the simulated hosts time their keepalive, retries
  and connect timeouts from it, the way paho does.
- `BEHAVIOURS`: what a broker does where MQTT 3.1.1 leaves room or brokers stray, one row
  per broker model a topology can name (`[broker] model = "amqtt" | "mosquitto" |
  "generic"`). The amqtt and Mosquitto rows are what `a2a-bench brokers` measured on the
  brokers the bench starts (amqtt 0.12.1, Mosquitto 2.0.11; `tests/live/test_brokers.py`
  measures them again and fails where a row no longer holds); "generic" is MQTT 3.1.1 as
  written, where the standard says what happens.

So `--mode sim --broker mosquitto` predicts a live run on Mosquitto, and a topology's
default ("generic") shows what a conforming broker would do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from bench.spec.topology import MqttVersion

if TYPE_CHECKING:
    from bench.spec.scenario import Scenario


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """A node's MQTT client (paho's settings, live; the same timings in simulation)."""

    keepalive_s: int = 5
    #: MQTT 5: how long a persistent session outlives its connection (Session Expiry
    #: Interval): longer than any outage a scenario makes, short enough that an isolated
    #: run's sessions do not linger on a shared broker
    session_expiry_s: int = 600
    #: paho's reconnect_delay_set: the first retry after min, each next one doubled up to max
    backoff_min_s: int = 1
    backoff_max_s: int = 2

    def backoff_s(self, attempt: int) -> float:
        """The wait before reconnect attempt `attempt` (1 = the first after a loss)."""
        return float(min(self.backoff_min_s * 2 ** (attempt - 1), self.backoff_max_s))

    def notice_ms(self, now_ms: float, last_in_ms: float, last_out_ms: float) -> float:
        """When the client declares a silent connection dead (paho's keepalive check): a
        PINGREQ once `keepalive` passed since the last packet either way (an idle client
        pings every keepalive, so that is never later than now + keepalive), then the
        close once another keepalive passes without a byte from the broker."""
        ka = self.keepalive_s * 1000.0
        quiet_since = max(min(last_in_ms, last_out_ms), now_ms - ka)
        return max(now_ms, quiet_since + ka) + ka

    def connect_timeout_ms(self) -> float:
        """An unanswered CONNECT: paho closes it at its keepalive check, keepalive after."""
        return self.keepalive_s * 1000.0


CLIENT = ClientConfig()

#: A live run's workload starts this long (mod the broker's sweep) after the whole second
#: its broker started in, on a whole second of the monotonic clock, where the broker counts
#: whole seconds (see `KeepaliveCheck`) — its nodes start early by about the time they take
#: to come up, and the workload as soon as they are up; the simulated broker starts this
#: long before its nodes and workload do (at 0). So a periodic sweep has one phase in both,
#: to within the error of that estimate (tens of ms) — every fault and request is timed
#: from the workload's start — and the sim predicts the second a silent node is given up
#: in, not a 6 s window.
RUN_AFTER_BROKER_MS = 1000.0


class TakeoverWill(StrEnum):
    """Whose will a broker publishes when a second connection takes a client id over."""

    NONE = "none"    # 3.1.1: the server closed it, not a network failure or a protocol error
    OLD = "old"      # the displaced connection's, as for any connection the server closes
    NEW = "new"      # the new, still open, connection's (a defect)


@dataclass(frozen=True, slots=True)
class KeepaliveCheck:
    """How a broker gives a silent client up ([MQTT-3.1.2-24]: after 1.5 x its keepalive
    without a packet from it). Mosquitto 2.0 compares whole seconds (more than
    keepalive*3/2 in integer arithmetic) of its monotonic clock, in a sweep over all
    clients at the broker's start and every 6 s after (`last_keepalive_check + 5 < now`,
    on the whole second), so a silent client goes 7-14 s after its last packet at
    keepalive 5 s.

    Whole seconds are the workload's: the live bench starts a workload on (about) a whole
    second of the broker's monotonic clock, `RUN_AFTER_BROKER_MS` (mod the sweep) after
    the second the broker started in, and the simulated broker starts that long before
    the workload."""

    whole_seconds: bool = False
    sweep_s: float | None = None      # None: checked continuously

    def threshold_s(self, keepalive_s: int) -> float:
        return keepalive_s * 3 // 2 + 1 if self.whole_seconds else 1.5 * keepalive_s

    def started_ms(self, now_ms: float) -> float:
        """Where a broker started at `now_ms` counts its sweeps from: the whole second
        it started in, when it counts whole seconds."""
        return now_ms // 1000.0 * 1000.0 if self.whole_seconds else now_ms

    def close_at_ms(self, last_in_ms: float, keepalive_s: int, origin_ms: float = 0.0) -> float:
        """When a client silent since `last_in_ms` is closed (sweeps counted from the
        broker's start, `origin_ms`)."""
        if self.whole_seconds:      # the second of the last packet is what the broker keeps
            last_in_ms = last_in_ms // 1000.0 * 1000.0
        due = last_in_ms + self.threshold_s(keepalive_s) * 1000.0
        if self.sweep_s is None:
            return due
        period = self.sweep_s * 1000.0
        return origin_ms + -(-(due - origin_ms) // period) * period   # the first sweep at or after


class SharedInFlight(StrEnum):
    """What a broker does with the QoS1 messages a member of a shared subscription held
    unacknowledged when its connection dropped (MQTT 5 §4.8.2 allows both of the first)."""

    SESSION = "session"        # kept for that member's session, sent when it is back
    OTHER_MEMBER = "other"     # sent to another member of the group
    LOST = "lost"              # neither (a defect: the message was accepted)


@dataclass(frozen=True, slots=True)
class V5Behaviour:
    """What a broker does with what MQTT 5 adds (`a2a-bench brokers`, facts5.py)."""

    #: a session ends with its Session Expiry Interval, and not before ([MQTT-3.1.2-23])
    session_expiry: bool = True
    #: a queued message past its Message Expiry Interval is not delivered, and the rest
    #: are forwarded with what is left of theirs ([MQTT-3.3.2-5], [MQTT-3.3.2-6])
    message_expiry: bool = True
    #: a will waits its Will Delay Interval, and is not sent if the client is back ([MQTT-3.1.3-9])
    will_delay: bool = True
    #: User Properties (in order), Response Topic, Correlation Data and Content Type are
    #: forwarded unchanged, on retained messages too (False, the simulated broker: a seeded
    #: defect that drops the Response Topic and the Correlation Data, as moat-lib-mqtt 0.8.7
    #: was seen to)
    properties_kept: bool = True
    #: the PUBACK reason for a QoS1 PUBLISH nobody subscribes to: 0x10, or 0x00 (both allowed)
    no_subscribers_reason: int = 0x10
    #: no more unacknowledged QoS1 messages in flight to a client than its Receive Maximum
    receive_maximum: bool = True
    #: shared subscriptions: each message to one member of a group, members in turn
    shared: bool = True
    shared_in_flight: SharedInFlight = SharedInFlight.SESSION
    #: a shared subscription on a topic that starts with `$` is delivered to
    shared_on_dollar_topics: bool = True
    #: a defect: a shared group's message goes to every member, as if each had subscribed
    #: the filter alone (breaking MQTT 5 §4.8.2); no row here has it, a test seeds it
    shared_to_every_member: bool = False
    #: a broker that keeps topics starting with `$` to itself (MQTT 5 §4.7.2 says a server
    #: SHOULD keep clients from exchanging messages on them): a client's QoS 1 PUBLISH to one
    #: is refused, PUBACK 0x87 Not authorized, and not routed — every A2A-over-MQTT request,
    #: card and reply is on `$a2a/...`; no row here has it, a test seeds it
    refuses_dollar_publishes: bool = False


@dataclass(frozen=True, slots=True)
class BrokerBehaviour:
    name: str
    #: overlapping subscriptions of one client: a copy per matching filter, or one per client
    copy_per_filter: bool
    takeover_will: TakeoverWill
    #: a graceful stop (SIGTERM) publishes the wills of every connection it closes
    wills_on_shutdown: bool
    #: how a silent client is closed (and its will published); None: never
    keepalive_close: KeepaliveCheck | None
    #: a resumed session gets its unacknowledged QoS1 messages again, with DUP=1
    resends_on_resume: bool
    #: sessions, queued messages and retained messages survive a graceful restart
    persistent: bool
    #: how long a started broker takes to listen (a reconnect sooner is refused)
    start_ms: float
    #: where the row comes from
    source: str
    #: a defect seen on a third-party broker: what it re-sends on a resumed session goes
    #: under new packet ids with DUP=0 (breaking [MQTT-4.4.0-1], [MQTT-3.3.1-1]); no row
    #: here has it, a test seeds it
    resends_under_new_ids: bool = False
    #: a defect seen on a third-party broker (MQTTnet 4.2, dotnet/MQTTnet#1756): a session
    #: past its MQTT 5 Session Expiry Interval is resumed as if it had not expired; no row
    #: here has it, a test seeds it
    resumes_expired_sessions: bool = False
    #: a defect: a client that connects while another client subscribes to a filter
    #: nobody had may never have its SUBSCRIBE acknowledged — left connected and never
    #: served, or closed (breaking [MQTT-3.8.4-1]): nodes started side by side then come
    #: up deaf, so a live deployment connects its nodes one after another on such a broker.
    #: The simulated broker does not model it (a run there judges the nodes, not this race)
    subscribe_races_connect: bool = False
    #: what it does with MQTT 5 (None: it does not speak it; a v5 run on it is refused)
    v5: V5Behaviour | None = V5Behaviour()

    def keepalive_close_ms(self, keepalive_s: int) -> tuple[float, float] | None:
        """The earliest and latest time after a client's last packet that it is closed
        (None: never)."""
        check = self.keepalive_close
        if check is None:
            return None
        low = (check.threshold_s(keepalive_s) - (1 if check.whole_seconds else 0)) * 1000.0
        return low, low + (check.sweep_s or 0.0) * 1000.0


BEHAVIOURS: dict[str, BrokerBehaviour] = {b.name: b for b in (
    BrokerBehaviour(
        "generic", copy_per_filter=True, takeover_will=TakeoverWill.NONE,
        wills_on_shutdown=False, keepalive_close=KeepaliveCheck(), resends_on_resume=True,
        persistent=True, start_ms=0.0,
        source="MQTT 3.1.1: [MQTT-3.1.2-24] 1.5 x keepalive, [MQTT-4.4.0-1] resend on "
               "resume; a copy per filter is allowed ([MQTT-3.3.5-1]) and the harder case; "
               "MQTT 5 as written, a shared member's in-flight kept for its session (§4.8.2)"),
    BrokerBehaviour(
        "amqtt", copy_per_filter=True, takeover_will=TakeoverWill.NEW,
        wills_on_shutdown=False, keepalive_close=None, resends_on_resume=False,
        persistent=False, start_ms=250.0, v5=None, subscribe_races_connect=True,
        source="a2a-bench brokers, amqtt 0.12.1 embedded: 2 copies, the new client's will, no "
               "will on a graceful stop, never closes a silent client, resends nothing, "
               "keeps nothing over a restart, a SUBSCRIBE racing a connect not always "
               "acknowledged; listening 0.25 s after its start (the broker_restart "
               "scenario's history, live)"),
    BrokerBehaviour(
        "mosquitto", copy_per_filter=False, takeover_will=TakeoverWill.NONE,
        wills_on_shutdown=True, keepalive_close=KeepaliveCheck(whole_seconds=True, sweep_s=6.0),
        resends_on_resume=True,
        persistent=True, start_ms=50.0, v5=V5Behaviour(shared_on_dollar_topics=False),
        source="a2a-bench brokers, Mosquitto 2.0.11 (persistence on): 1 copy, no will at a "
               "takeover, every will on SIGTERM, a silent client closed by a 6 s sweep once "
               "more than keepalive*3/2 whole seconds passed (measured 5.3-6.0 s at keepalive "
               "2 s, 11.1-12.0 s at 5 s), resent with DUP=1, sessions kept; "
               "listening 0.05 s after its start; on MQTT 5 every v5 fact as written but one: "
               "a shared subscription on a topic that starts with $ is never delivered to "
               "(PUBACK 0x10), a plain one is"),
)}


def _with(**changes: object) -> Callable[[BrokerBehaviour], BrokerBehaviour]:
    return lambda base: replace(base, **changes)  # type: ignore[arg-type]


def _with_v5(**changes: object) -> Callable[[BrokerBehaviour], BrokerBehaviour]:
    def change(base: BrokerBehaviour) -> BrokerBehaviour:
        assert base.v5 is not None, f"{base.name} speaks no MQTT 5"
        return replace(base, v5=replace(base.v5, **changes))  # type: ignore[arg-type]
    return change


@dataclass(frozen=True, slots=True)
class BrokerDefect:
    """A broker breaking one MUST, seeded into the simulated broker's "generic" row: the
    rule that must catch it on `scenario` (as `bench/variants.py` seeds defects into
    nodes), and the clause it breaks. Where a defect was seen on a real broker, `seen`
    says where. Every rule that judges the broker has one (tests/sim/test_broker_promises.py
    runs each, and fails on a broker rule without one)."""

    name: str
    scenario: str
    caught_by: str          # the checker
    rule: str               # its rule
    clause: str
    seen: str
    change: Callable[[BrokerBehaviour], BrokerBehaviour]

    def row(self, base: BrokerBehaviour) -> BrokerBehaviour:
        """`base` with this defect."""
        return self.change(base)


BROKER_DEFECTS: dict[str, BrokerDefect] = {d.name: d for d in (
    BrokerDefect("resends_under_new_ids", "broker_redelivery", "deployment",
                 "redelivers_the_same_packet", "[MQTT-4.4.0-1], [MQTT-3.3.1-1]",
                 "RabbitMQ 3.10.8 (new packet ids), rumqttd 0.20 and iotcore 0.4 (new "
                 "packet ids, DUP=0), a third-party broker a user brought",
                 _with(resends_under_new_ids=True)),
    BrokerDefect("never_gives_up_a_silent_client", "partition", "deployment",
                 "gives_up_a_silent_client", "[MQTT-3.1.2-24]",
                 "amqtt 0.12.1; rumqttd 0.20 while it sends to the client",
                 _with(keepalive_close=None)),
    BrokerDefect("wills_the_new_connection", "duplicate_client_id", "deployment",
                 "takeover_publishes_no_live_will", "[MQTT-3.1.4-2], [MQTT-3.1.2-8]",
                 "amqtt 0.12.1: at a takeover it publishes the will of the connection that "
                 "took over, still open", _with(takeover_will=TakeoverWill.NEW)),
    BrokerDefect("resumes_expired_sessions", "session_expired", "deployment",
                 "expired_session_not_resumed", "[MQTT-4.1.0-2]",
                 "MQTTnet 4.2 (dotnet/MQTTnet#1756); rumqttd 0.20 and iotcore 0.4 keep a "
                 "session past its expiry", _with(resumes_expired_sessions=True)),
    BrokerDefect("no_shared_subscriptions_on_dollar_topics", "a2a_pool", "a2a_broker",
                 "pooled_requests_reach_the_pool", "A2M-POOL-1 (MQTT 5 §4.8.2 on $a2a/...)",
                 "Mosquitto 2.0.11: a shared subscription on a $ topic is never delivered "
                 "to (PUBACK 0x10)", _with_v5(shared_on_dollar_topics=False)),
    BrokerDefect("pools_accepted_and_dropped", "a2a_pool", "a2a_broker",
                 "pooled_requests_reach_the_pool", "A2M-POOL-1; MQTT 5 §4.8.2",
                 "moat-lib-mqtt 0.8.7: a request to a pool on $a2a/... answered PUBACK 0x00 and "
                 "delivered to no member", _with_v5(shared_on_dollar_topics=False,
                                                    no_subscribers_reason=0x00)),
    BrokerDefect("shared_to_every_member", "a2a_pool", "a2a_broker",
                 "pooled_requests_reach_one_member", "MQTT 5 §4.8.2",
                 "moat-lib-mqtt 0.8.7 (not once per group); a plausible $share bug",
                 _with_v5(shared_to_every_member=True)),
    BrokerDefect("ignores_message_expiry", "a2a_expiry", "a2a_broker",
                 "expired_requests_not_delivered", "[MQTT-3.3.2-5]",
                 "ejabberd 23.01 delivers an expired message to a session that was away",
                 _with_v5(message_expiry=False)),
    BrokerDefect("drops_the_reply_path", "a2a_quickstart", "a2a_broker",
                 "requests_keep_their_reply_path", "[MQTT-3.3.2-15], [MQTT-3.3.2-16]",
                 "moat-lib-mqtt 0.8.7: a request forwarded without its Response Topic (and "
                 "Correlation Data); every responder drops it", _with_v5(properties_kept=False)),
    BrokerDefect("refuses_dollar_publishes", "a2a_quickstart", "a2a_broker",
                 "refusals_have_a_cause", "MQTT 5 §3.4.2.1 (a refusal has a reason); "
                 "A2M-QOS-1", "ejabberd 23.01 (PUBACK 0x90 on $a2a/...): a broker keeping $ "
                 "topics to itself (MQTT 5 §4.7.2's SHOULD)",
                 _with_v5(refuses_dollar_publishes=True)),
)}


def version_refusal(scenario: Scenario, broker: str, elsewhere: str = "") -> str | None:
    """Why `broker` (a row of BEHAVIOURS: a broker, or the simulator's model of one) cannot
    carry the scenario's MQTT version, in one line, or None. `elsewhere`: where else the
    user may turn (the live substrates add a broker of their own)."""
    row = BEHAVIOURS.get(broker)
    if row is not None and row.v5 is None and scenario.mqtt is MqttVersion.V5:
        return (f"{scenario.source}: MQTT 5 on {broker}: it speaks MQTT 3.1.1 only (a v5 "
                f"CONNECT is never answered: `a2a-bench brokers`); use --broker mosquitto"
                + elsewhere + ("" if scenario.mqtt_fixed else ", or --mqtt 3.1.1"))
    return None
