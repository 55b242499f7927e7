"""The nemesis: plays each fault's script on the run's one timeline and journals it.

For every fault of the scenario, at its time: `fault_start` (journal first, with whether
the fault may legitimately swallow requests), then the script's steps — each primitive
carried out by the deployment, its firings journaled as `fault_fired`, a crash as
`node_crashed`, a refusal as `fault_refused` — and `fault_healed` when the script ends.
A script or a primitive that throws is journaled as `fault_error` and ends like a refusal:
the run goes on, and the verdicts that needed the fault say UNKNOWN.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, assert_never

from bench.core import events as ev
from bench.core.config import NodeConfig
from bench.faults import CATALOGUE
from bench.faults.primitives import Broke, Crash, Crashed, Done, Firing, Outcome, Primitive, Refused
from bench.faults.scripts import HEAL, Refuse, Script, Wait
from bench.faults.spec import FaultSpec
from bench.spec.topology import Topology


class Stage(Protocol):
    """What the nemesis needs of a deployment (`bench.substrates.Deployment` has it all)."""

    seed: int
    topology: Topology
    jitter_ms: float
    mqtt_version: str         # the MQTT version the run's clients speak

    def now_ms(self) -> float: ...
    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> None: ...
    def act(self, step: Primitive, done: Callable[[Outcome], None]) -> None: ...
    def config(self, node: str) -> NodeConfig: ...
    def booted_at_ms(self, node: str) -> float: ...
    def record(self, node: str, event: ev.Event) -> None: ...


@dataclass
class _Run:
    spec: FaultSpec
    end_ms: float                  # absolute end of the fault's window (the stage's clock)
    script: Script | None = None
    finished: bool = False


class Nemesis:
    """Plays every fault of a scenario on a stage; `active` while any script has not ended."""

    def __init__(self, stage: Stage, faults: tuple[FaultSpec, ...], *, origin_ms: float,
                 workload_ms: float) -> None:
        """`origin_ms`: when the workload's clock started on the stage's clock;
        `workload_ms`: how long the workload runs, the window of a fault without a duration."""
        self.stage = stage
        self.faults = faults
        self.origin_ms = origin_ms
        self.workload_ms = workload_ms
        self.runs: list[_Run] = []
        self.halted = False

    @property
    def active(self) -> bool:
        """Some script has not finished (it is waiting, or a primitive is in progress)."""
        return any(not r.finished for r in self.runs) or len(self.runs) < len(self.faults)

    def schedule(self) -> None:
        offset = self.origin_ms - self.stage.now_ms()
        for spec in self.faults:
            self.stage.call_later(spec.at_ms + offset, lambda spec=spec: self._begin(spec))

    # -- journal -------------------------------------------------------------------------------
    def _fired(self, run: _Run, firing: Firing) -> None:
        self.stage.record(firing.node, ev.FaultFired(run.spec.kind, run.spec.index,
                                                     firing.action, dict(firing.details)))

    def _refused(self, run: _Run, what: str, reason: str) -> None:
        self.stage.record("nemesis", ev.FaultRefused(run.spec.kind, run.spec.index, what,
                                                     reason))

    # -- the script -------------------------------------------------------------------------------
    def _begin(self, spec: FaultSpec) -> None:
        if self.halted:
            return
        kind = CATALOGUE[spec.kind]
        window = spec.at_ms + spec.duration_ms if spec.duration_ms is not None \
            else self.workload_ms
        run = _Run(spec, self.origin_ms + window)
        self.runs.append(run)
        self.stage.record("nemesis", ev.FaultStart(spec.kind, spec.index, spec.at_ms,
                                                   spec.duration_ms, spec.plain_params(),
                                                   kind.disrupts))
        assert kind.script is not None, f"fault kind {spec.kind} has no script"
        try:
            run.script = kind.script(spec, _Context(self, run))
        except Exception as exc:   # a broken script is journaled, never a dead run
            self._error(run, exc)
            return
        self._advance(run, None)

    def _advance(self, run: _Run, value: Outcome | None) -> None:
        """Run the script until it waits (a Wait, HEAL or a primitive in progress) or ends."""
        assert run.script is not None
        if self.halted:
            return
        try:
            step = run.script.send(value) if value is not None else next(run.script)
        except StopIteration:   # done acting; the fault's window still closes on time
            self._at_window_end(run, lambda: self._finish(run))
            return
        except Exception as exc:
            self._error(run, exc)
            return
        match step:
            case Wait():
                self.stage.call_later(step.delay_ms, lambda: self._advance(run, None))
            case Refuse():
                self._refused(run, "script", step.reason)
                self._stop(run)
            case _ if step is HEAL:
                self._at_window_end(run, lambda: self._advance(run, None))
            case _:
                self._act(run, step, lambda outcome: self._after(run, step, outcome))

    def _act(self, run: _Run, step: Primitive, then: Callable[[Outcome], None]) -> None:
        try:
            self.stage.act(step, then)
        except Exception as exc:
            self._error(run, exc)

    def _after(self, run: _Run, step: Primitive, outcome: Outcome) -> None:
        match outcome:
            case Refused():
                self._refused(run, type(step).__name__, outcome.reason)
                self._stop(run)
            case Broke():
                self._broke(run, outcome.error, outcome.where)
            case Done():
                try:
                    self._journal_done(run, step, outcome)
                except Exception as exc:
                    self._error(run, exc)
                    return
                self._advance(run, outcome)
            case _:
                assert_never(outcome)

    def _journal_done(self, run: _Run, step: Primitive, outcome: Done) -> None:
        if isinstance(step, Crash):
            crashed = outcome.crashed or Crashed("not said")
            self.stage.record(step.node, ev.NodeCrashed(run.spec.index, crashed.how,
                                                        crashed.lost_writes))
        for firing in outcome.firings:
            self._fired(run, firing)

    def _stop(self, run: _Run) -> None:
        """A stopped fault does nothing more, and is not said to be healed: what it did
        before the refusal or the error may still be in effect (the journal says which)."""
        run.finished = True
        if run.script is not None:
            run.script.close()

    def _at_window_end(self, run: _Run, fn: Callable[[], None]) -> None:
        self.stage.call_later(max(0.0, run.end_ms - self.stage.now_ms()), fn)

    def _error(self, run: _Run, exc: BaseException) -> None:
        self._broke(run, repr(exc)[:300], traceback.format_exc(limit=4)[-600:])

    def _broke(self, run: _Run, error: str, where: str) -> None:
        self.stage.record("nemesis", ev.FaultError(run.spec.kind, run.spec.index, error, where))
        self._stop(run)

    def _finish(self, run: _Run) -> None:
        if run.finished or self.halted:
            return
        run.finished = True
        self.stage.record("nemesis", ev.FaultHealed(run.spec.kind, run.spec.index))

    def halt(self) -> None:
        """The run was interrupted: no fault begins, and no script takes another step, while
        the deployment stops (what a fault still has in effect, the stop undoes). The
        interruption is journaled by the run; a fault it cut short says nothing more."""
        self.halted = True
        for run in self.runs:
            if not run.finished and run.script is not None:
                run.script.close()

    def close(self) -> None:
        """The run is over: a fault whose script had not ended (its window or its down time
        reached past the drain) or had not even begun is said so, never left silent."""
        begun = {r.spec.index for r in self.runs}
        for run in self.runs:
            if not run.finished:
                self._broke(run, "cut off: the run ended before the fault's script did", "")
        for spec in self.faults:
            if spec.index not in begun:
                self.stage.record("nemesis", ev.FaultError(
                    spec.kind, spec.index, "never began: the run ended before its time", ""))


class _Context:
    """What a script may ask (bench.faults.scripts.Context), for one fault."""

    def __init__(self, nemesis: Nemesis, run: _Run) -> None:
        self._nemesis = nemesis
        self._run = run
        stage = nemesis.stage
        self.seed = stage.seed
        self.topology = stage.topology
        self.end_ms = run.end_ms
        self.jitter_ms = stage.jitter_ms
        self.mqtt = stage.mqtt_version

    def now_ms(self) -> float:
        return self._nemesis.stage.now_ms()

    def wall_ms(self) -> int:
        """What the nodes' clocks read now (without any skew): what an attacker stamps."""
        stage = self._nemesis.stage
        return int(stage.clock_origin_ms + stage.now_ms())

    def config(self, node: str) -> NodeConfig:
        return self._nemesis.stage.config(node)

    def booted_at_ms(self, node: str) -> float:
        return self._nemesis.stage.booted_at_ms(node)

    def fired(self, firing: Firing) -> None:
        self._nemesis._fired(self._run, firing)

    def attack_sent(self, event: ev.AttackSent) -> None:
        self._nemesis.stage.record("nemesis", event)

    def later(self, delay_ms: float, fn: Callable[[], None]) -> None:
        nemesis, run = self._nemesis, self._run

        def guarded() -> None:   # a script's own timer: its error is journaled, not fatal
            try:
                fn()
            except Exception as exc:
                nemesis._error(run, exc)
        nemesis.stage.call_later(delay_ms, guarded)

    def act(self, step: Primitive, then: Callable[[Outcome], None] | None = None) -> None:
        nemesis, run = self._nemesis, self._run

        def done(outcome: Outcome) -> None:
            try:
                match outcome:
                    case Refused():
                        nemesis._refused(run, type(step).__name__, outcome.reason)
                    case Broke():
                        nemesis.stage.record("nemesis", ev.FaultError(
                            run.spec.kind, run.spec.index, outcome.error, outcome.where))
                    case Done():
                        nemesis._journal_done(run, step, outcome)
                if then is not None:
                    then(outcome)
            except Exception as exc:
                nemesis._error(run, exc)
        nemesis._act(run, step, done)
