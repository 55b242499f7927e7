"""Auth admission (DESIGN §5, §7; seed 002 §8): what each mode let through, and whether the
nodes kept to the admission matrix."""

from __future__ import annotations

from collections import defaultdict

from bench.checks import Checker, Collector, rule
from bench.checks.network import EVERY_NODE, Transit, clocks, fault_windows
from bench.checks.terms import ADMITTED, IN_FLIGHT_AT_END_MS, MALFORMED_ENVELOPE
from bench.core.events import (
    AttackSent,
    AuthMode,
    AuthVerdict,
    DropReason,
    Event,
    FaultError,
    FaultRefused,
    FaultStart,
    GateDecisionSent,
    GateOpenSent,
    InboundAdmitted,
    InboundDropped,
    KeysRotated,
    OutboundSettled,
    RequestSent,
    SignatureVerdict,
    TaskExecuted,
    Via,
)
from bench.history import History
from bench.protocols.seed.rules.inbound import drops


def _decisions(h: History) -> list[tuple[InboundAdmitted | InboundDropped, bool, SignatureVerdict]]:
    """Every admission decision on a message that came over MQTT: (event, admitted, verdict)."""
    out: list[tuple[InboundAdmitted | InboundDropped, bool, SignatureVerdict]] = []
    for a in h.of(InboundAdmitted):
        if a.via == Via.MQTT and a.verdict:
            out.append((a, True, a.verdict))
    for d in drops(h):
        if d.reason == DropReason.AUTH_REJECTED and d.verdict:
            out.append((d, False, d.verdict))
    return out


@rule("DESIGN §5: strict admits VERIFIED only; loose also UNSIGNED; audit everything")
def mode_keeps_the_matrix(h: History, c: Collector) -> None:
    """Every inbound decision keeps the node's mode: strict admits VERIFIED only, loose
    VERIFIED and UNSIGNED, audit everything."""
    for d, admitted, verdict in _decisions(h):
        boot = h.boot_at(d.node, d.seq)
        if boot is None:
            continue
        mode = boot.auth_mode
        c.count(f"{mode}: {'admitted' if admitted else 'rejected'} {verdict}")
        if admitted != (verdict in ADMITTED[mode]):
            c.violation(f"{d.node} ({mode} mode) {'admitted' if admitted else 'rejected'} "
                        f"{d.message_type} {d.message_id} with verdict {verdict}", d)


#: The admission modes that record every verdict they admit (DESIGN §5).
RECORDING_EVERY_VERDICT = frozenset({AuthMode.AUDIT})


@rule("DESIGN §5: audit mode records every verdict (\"admitted is not blind\")")
def audit_records_what_it_admits(h: History, c: Collector) -> None:
    """In audit mode, every message admitted with a verdict other than VERIFIED is recorded
    with that verdict."""
    audit_log = {(e.node, e.message_id) for e in h.of(AuthVerdict)}
    for d, admitted, verdict in _decisions(h):
        boot = h.boot_at(d.node, d.seq)
        if boot is None or not admitted or boot.auth_mode not in RECORDING_EVERY_VERDICT \
                or verdict == SignatureVerdict.VERIFIED:
            continue
        if (d.node, d.message_id) not in audit_log:
            c.violation(f"{d.node} (audit mode) admitted {d.message_id} ({verdict}) without "
                        "recording it", d)


def _label(h: History, a: AttackSent) -> str:
    boot = h.boot_at(a.target_node_id or "", a.seq)
    attack = f"{a.attack}:{a.how}" if a.attack in ("forged_sender", "replay") else a.attack
    mode = boot.auth_mode if boot else "?"
    version = boot.signature_version if boot else "?"
    return f"{mode}/v{version} {attack}"


def _outcomes(h: History) -> dict[tuple[str, str], list[Event]]:
    outcomes: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for a in h.of(InboundAdmitted):
        outcomes[(a.node, a.message_id)].append(a)
    for d in drops(h):
        if d.message_id:
            outcomes[(d.node, d.message_id)].append(d)
    return outcomes


def _first_after(h: History, a: AttackSent) -> Event | None:
    """The attack message's first outcome at its target: the first record there of its
    messageId after it was sent — and of its requestId, where both say one: a forgery
    under a predicted messageId (ledger_poisoning) shares its id with the genuine message,
    which may reach the target after it (held on a session meanwhile)."""
    after = [o for o in h.memo(_outcomes).get((a.target_node_id or "", a.message_id), [])
             if o.seq > a.seq and (a.request_id is None
                                   or getattr(o, "request_id", None) in (None, a.request_id))]
    return min(after, key=lambda o: o.seq) if after else None


#: The faults that send attack messages (each journals an AttackSent per message).
ATTACK_FAULTS = frozenset({"forged_sender", "hostile_input", "ledger_poisoning", "replay",
                           "tamper_payload", "tamper_routing", "tamper_headers"})


@rule("DESIGN §3 Inbound: every drop is a recorded outcome; §5 attacks")
def attack_has_an_outcome(h: History, c: Collector) -> None:
    """Every attack message that reached a node has a recorded outcome there (admitted, or
    dropped with a reason) — one injected while the broker was down, or that the network
    lost as the journal explains (delivery.Transit), never reached it; counts say what
    each mode and signature let in and ran. An attack fault that ran and sent nothing at
    all (a capture that caught no request, a tamper that met none) leaves the scenario's
    point unexercised: undecided, not passed."""
    sent_by = {a.fault_index for a in h.of(AttackSent)}
    refused = {e.fault_index for e in h.of(FaultRefused)} | {e.fault_index for e in h.of(FaultError)}
    for f in h.of(FaultStart):
        if f.fault in ATTACK_FAULTS and f.fault_index not in sent_by \
                and f.fault_index not in refused:
            c.unknown(f"{f.fault}_sent_nothing")
    executions: dict[tuple[str, str], list[TaskExecuted]] = defaultdict(list)
    for x in h.of(TaskExecuted):
        executions[(x.node, x.message_id)].append(x)
    # an attack journaled, then not carried out (its injection refused or broke)
    broken = [(e.fault_index, e.seq) for e in h.of(FaultRefused)] \
        + [(e.fault_index, e.seq) for e in h.of(FaultError)]
    transit = h.memo(Transit)
    for a in h.of(AttackSent):
        if a.attack == MALFORMED_ENVELOPE:     # malformed input: robustness judges it
            continue
        label = _label(h, a)
        c.count(f"{label} sent")
        first = _first_after(h, a)
        if first is None:
            why = transit.lost(a.node, a.t_ms, a.target_node_id or "")
            if any(index == a.fault_index and seq > a.seq for index, seq in broken):
                c.unknown("attack_maybe_not_sent")
            elif a.t_ms > h.end_ms - IN_FLIGHT_AT_END_MS:
                c.unknown("attack_in_flight_at_end")
            elif any(o.node == EVERY_NODE and o.start_ms <= a.t_ms <= o.end_ms
                     for o in transit.outages):
                c.count("attack_sent_while_the_broker_was_down")
            elif why in Transit.UNDECIDED:
                c.unknown(why)
            elif why is not None:
                c.count(f"attack_{why}")
            else:
                c.violation(f"attack message {a.message_id} to {a.target_node_id} has no "
                            "recorded outcome", a)
            continue
        if isinstance(first, InboundAdmitted):
            c.count(f"{label} admitted")
            ran = [x for x in executions.get((a.target_node_id or "", a.message_id), [])
                   if x.seq > a.seq]
            if ran:
                c.count(f"{label} executed")


@rule("DESIGN §5 verdicts; seed 002 §8 (a strict mode that trusts claims)")
def verdict_is_honest(h: History, c: Collector) -> None:
    """A node judges an attack message as an honest verifier does: the verdict it recorded
    is the one the signature scheme gives. The honest verifier reads the true time; a node
    whose clock a fault has set off may disagree on freshness alone (STALE one way or the
    other), as an honest verifier with that clock would."""
    skewed = [f for f in h.memo(fault_windows) if f.fault == "clock_skew"]
    attacks = [a for a in h.of(AttackSent) if a.attack != MALFORMED_ENVELOPE]
    for a in attacks:
        first = _first_after(h, a)
        recorded = getattr(first, "verdict", None) if first is not None else None
        if first is not None and any(
                b.seq > a.seq and b.seq < first.seq and b.message_id == a.message_id
                and b.target_node_id == a.target_node_id for b in attacks):
            c.count("outcome_of_a_later_attack_on_the_same_message")   # e.g. a replay tampered
        elif first is not None and recorded is not None and recorded != a.honest_verdict \
                and SignatureVerdict.STALE in (recorded, a.honest_verdict) \
                and any(a.target_node_id in f.nodes and f.start_ms <= first.t_ms <= f.end_ms
                        for f in skewed):
            c.count("freshness_judged_on_a_skewed_clock")
        elif first is not None and recorded == SignatureVerdict.BAD_SIGNATURE \
                and a.kid is not None and _rotated_in_flight(h, a, first):
            # signed under a key the target retired after the send and before the check:
            # the honest verdict at the send no longer holds at the target
            c.count("signed_under_a_key_rotated_in_flight")
        elif first is not None and recorded is not None and recorded != a.honest_verdict:
            c.violation(f"{a.target_node_id} recorded {recorded} for {a.attack} message "
                        f"{a.message_id} ({a.how}); an honest verifier says {a.honest_verdict}",
                        a, first)


def _rotated_in_flight(h: History, a: AttackSent, checked: Event) -> bool:
    """The target's last key rotation between the attack's send and its check retired the
    attack's kid (no overlap kept the old key) — recorded by the target, or, for a target
    that was down when the key_rotation fault rotated the attack's key and started again
    after the overlap, read with its keys at that start (explore, seed 30 run 280: a replay
    queued for a node restarting across the rotation)."""
    rotations = [k for k in h.of(KeysRotated)
                 if k.node == a.target_node_id and a.seq < k.seq < checked.seq]
    if rotations:
        return a.kid in rotations[-1].kids and a.kid not in rotations[-1].overlap_kids
    for f in h.of(FaultStart):
        params = f.params if isinstance(f.params, dict) else {}
        overlap = params.get("overlap_ms", 0.0)
        if f.fault == "key_rotation" and params.get("agent") == a.kid \
                and params.get("stale_node") != a.target_node_id \
                and a.seq < f.seq < checked.seq and isinstance(overlap, int | float) \
                and any(f.seq < b.seq < checked.seq and b.t_ms >= f.t_ms + overlap
                        for b in h.boots(a.target_node_id or "")):
            return True
    return False


@rule("DESIGN §3 Inbound: auth admission before ledger dedup; DESIGN §5")
def refusal_leaves_no_trace(h: History, c: Collector) -> None:
    """A message refused at admission leaves nothing behind: a later message under the
    same messageId is judged on its own, never dropped as a DUPLICATE of the refused one.
    Otherwise anyone on the broker who can guess messageIds (they are predictable) silences
    a sender by forging its next ones ahead of it (ledger_poisoning). Undecided where an
    attack forged messageIds ahead and no genuine message ever followed a forgery."""
    # what passed admission into the ledger: admitted, or dropped after the ledger took it
    # (NOT_MINE: routing comes after dedup, DESIGN §3) — a later copy is rightly a DUPLICATE
    admitted: set[tuple[str, str]] = set()
    refused: set[tuple[str, str]] = set()
    followed = 0
    events: list[InboundAdmitted | InboundDropped] = sorted(
        [*h.of(InboundAdmitted), *drops(h)], key=lambda e: e.seq)
    for e in events:
        if e.message_id is None:
            continue
        key = (e.node, e.message_id)
        if isinstance(e, InboundAdmitted) or e.reason == DropReason.NOT_MINE:
            followed += key in refused and key not in admitted
            admitted.add(key)
        elif e.reason == DropReason.AUTH_REJECTED:
            refused.add(key)
        elif e.reason == DropReason.DUPLICATE and key in refused and key not in admitted:
            followed += 1
            c.violation(f"{e.node} dropped {e.message_id} as a DUPLICATE of a message it had "
                        "refused at admission (its ledger learned a refused messageId)", e)
    c.count("genuine_after_a_refused_one", followed)
    ahead = any(a.attack == "ledger_poisoning" for a in h.of(AttackSent))
    if ahead and not followed:
        c.unknown("no_genuine_message_followed_a_forgery_of_its_id")


@rule("DESIGN §5 key rotation: the replaced key is still accepted for the overlap window")
def overlap_accepts_the_replaced_key(h: History, c: Collector) -> None:
    """While a key rotation's overlap lasts, a receiver accepts the key it replaced as well
    as the new one: a genuine message from that agent — signed before the rotation, or by
    a node the new key has not reached — is never BAD_SIGNATURE until the overlap ends. A
    node that drops the old key at once refuses what was in flight under it, and every
    request of a signer the rotation has not reached yet."""
    attacked = {a.message_id for a in h.of(AttackSent)}
    rotations: dict[str, list[KeysRotated]] = defaultdict(list)
    for k in h.of(KeysRotated):
        rotations[k.node].append(k)
    for d in drops(h):
        if d.reason != DropReason.AUTH_REJECTED or d.message_id in attacked \
                or d.from_agent_id is None or d.node not in rotations:
            continue
        last = max((k for k in rotations[d.node] if k.seq < d.seq), default=None,
                   key=lambda k: k.seq)
        if last is None or d.from_agent_id not in last.overlap_kids:
            continue
        c.count("refused_in_an_overlap")
        if d.verdict == SignatureVerdict.BAD_SIGNATURE:
            c.violation(f"{d.node} refused {d.message_type} {d.message_id} of "
                        f"{d.from_agent_id} as BAD_SIGNATURE {d.t_ms - last.t_ms:.0f} ms into "
                        "the overlap of its key's rotation, which still accepts the old key",
                        last, d)


#: DESIGN §5: a signed message's timestamp must lie within five minutes of the verifier's
#: clock, either way.
FRESHNESS_WINDOW_MS = 300_000.0
#: How close to the window a skew may be and still be judged (transit, whole-ms clocks).
_FRESHNESS_MARGIN_MS = 10_000.0


@rule("DESIGN §5: a timestamp more than five minutes off the verifier's clock is STALE, "
      "either way")
def stale_either_way(h: History, c: Collector) -> None:
    """A message signed on a clock set off by more than the freshness window — ahead as
    much as behind — is STALE to a verifier on a true clock: a node that checks only for
    the past lets in whatever carries a timestamp from the future (one captured from a
    clock running fast is then replayable for as long as it is ahead). Judged from the
    clock_skew faults: who signed it, when, and by how much that node's clock was off."""
    seen = h.memo(clocks)
    off = seen.off
    if not seen.skews:
        return
    sent = {o.message_id: o for o in h.of(OutboundSettled) if o.message_id}
    # when the sender signed what it sent: as it decided to send (the outbox signs then),
    # which the journal shows for a request, a gate opened and a decision — long before
    # the PUBACK if the sender's link was cut meanwhile (the client holds the publish)
    made = {e.message_id: e.t_ms for e in h.of(RequestSent)}
    made |= {e.message_id: e.t_ms for e in h.of(GateOpenSent)}
    made |= {e.message_id: e.t_ms for e in h.of(GateDecisionSent)}
    outages = h.memo(Transit).outages
    for a, _, verdict in _decisions(h):
        o = sent.get(a.message_id or "")
        if o is None or verdict in (SignatureVerdict.UNSIGNED, SignatureVerdict.BAD_SIGNATURE):
            continue
        signed = made.get(o.message_id)
        if signed is None:
            # signed before its PUBACK came, exactly when not recorded: a clock that moved
            # within the in-flight allowance, or while the sender was cut off, is not judged
            held = [x.start_ms for x in outages if x.node in (o.node, EVERY_NODE)
                    and x.start_ms <= o.t_ms <= x.end_ms + IN_FLIGHT_AT_END_MS]
            since = min([o.t_ms - IN_FLIGHT_AT_END_MS, *held])
            moved = any(off(o.node, t) != off(o.node, o.t_ms) for t in (since, *held))
        else:
            moved = off(o.node, signed - IN_FLIGHT_AT_END_MS) != off(o.node, signed)
        if moved or off(a.node, a.t_ms - IN_FLIGHT_AT_END_MS) != off(a.node, a.t_ms):
            c.count("signed_as_a_clock_moved")
            continue
        apart = off(o.node, o.t_ms if signed is None else signed) - off(a.node, a.t_ms)
        if abs(apart) < FRESHNESS_WINDOW_MS + _FRESHNESS_MARGIN_MS:
            continue
        c.count("signed_on_a_clock_off_by_more_than_the_window")
        if verdict != SignatureVerdict.STALE:
            c.violation(f"{a.node} gave {a.message_type} {a.message_id}, signed by {o.node} "
                        f"on a clock {apart / 60_000:+.0f} min off its own, the verdict "
                        f"{verdict}", o, a)


def _nothing_signed(h: History) -> str | None:
    if _decisions(h) or h.of(AttackSent):
        return None
    return "no signed or rejected inbound message"


AUTH_ADMISSION = Checker(
    "auth_admission", "Every inbound decision keeps the mode's admission matrix; every attack "
    "message gets the verdict an honest verifier gives it; audit mode records what it admits.",
    (mode_keeps_the_matrix, audit_records_what_it_admits, attack_has_an_outcome,
     verdict_is_honest, refusal_leaves_no_trace, overlap_accepts_the_replaced_key,
     stale_either_way),
    _nothing_signed)
