"""The process engine of an executor (seed 000 §5, seed 004, DESIGN §3): runs the process
instances of the node's tasks — a task whose request carries a `process` definition.

It drives each instance's steps (`bench.protocols.seed.steps`): a `work` step's attempts each on a
deep, versioned, parent-linked copy, retried from the pre-attempt snapshot; `parallel`
branches from one parent snapshot, merged in branch order; a `subflow` on a child context
whose failure fails its parent; a `human` step that pauses the instance (persisted PAUSED,
then GATE_OPEN to the conversation's home node) until a decision resumes exactly that
instance, exactly once — rehydrating it from its snapshot when a restart took it out of
memory. Statuses move only along the instance machine (`bench.protocols.seed.instance`). No I/O: a
step's work is a RunStep command answered by StepFinished.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from bench.core import events as ev
from bench.core.commands import PersistRecord, RunStep, Table
from bench.core.effects import Effects
from bench.core.envelope import Envelope, Header, Json, MessageType
from bench.core.vocabulary import AckStatus, Decision, StepKind
from bench.protocols.seed.context import (
    ContextError,
    Merge,
    Snapshot,
    Write,
    apply_ops,
    deep_copy,
    digest,
    merge,
)
from bench.protocols.seed.instance import (
    INSTANCE,
    TERMINAL,
    Attempt,
    Instance,
    InstanceEvent,
    InstanceStatus,
    Subflow,
)
from bench.protocols.seed.outbox import Sender
from bench.protocols.seed.payloads import GateDecisionBody
from bench.protocols.seed.steps import StepDef, parse_steps

#: How an instance's end reaches the task service: (fx, task id, ok, result, error).
Finish = Callable[[Effects, str, bool, Json, "str | None"], None]


#: What every instance's runtime context starts as: the mutable parts (004 §二.3).
TEMPLATE: dict[str, Json] = {"facts": {}, "log": [], "gates": {}}


class ProcessEngine:
    """Runs the process instances of one executor node."""

    def __init__(self, node_id: str, send: Sender, finish: Finish,
                 new_id: Callable[[], str]) -> None:
        self.node_id = node_id
        self.send = send
        self.finish = finish
        self.new_id = new_id
        self.instances: dict[str, Instance] = {}
        self.dormant: dict[str, Json] = {}        # snapshots read at start, not yet rehydrated
        self.template: Json = deep_copy(TEMPLATE)  # this node's; never handed out itself

    # -- variants override these seams -------------------------------------------------------
    def copy_context(self, data: Json) -> Json:
        """A working copy or snapshot of a context: deep, sharing nothing."""
        return deep_copy(data)

    def fresh_context(self, task_input: Json) -> Json:
        """The template's mutable parts (copied like any snapshot) and the read-only input."""
        context = self.copy_context(self.template)
        assert isinstance(context, dict)
        context["input"] = deep_copy(task_input)
        return context

    def pause(self, fx: Effects, inst: Instance, gate_id: str) -> None:
        """Set PAUSED, then persist: the snapshot must say PAUSED (000 §5.6 #17)."""
        inst.move(InstanceEvent.PAUSE_AT_GATE)
        inst.gate_id = gate_id
        self.persist(fx, inst, "pause")

    def instance_for_decision(self, fx: Effects, process_inst_id: str,
                              agent_id: str | None) -> Instance | None:
        """The instance a decision names: in memory, or rehydrated from its snapshot."""
        inst = self.instances.get(process_inst_id)
        return inst if inst is not None else self.rehydrate(fx, process_inst_id)

    def gate_matches(self, inst: Instance, gate_id: str) -> bool:
        return inst.gate_id == gate_id

    def rehydrate(self, fx: Effects, process_inst_id: str) -> Instance | None:
        raw = self.dormant.pop(process_inst_id, None)
        if raw is None:
            return None
        try:
            inst = Instance.from_json(raw)
        except (KeyError, TypeError, ValueError) as exc:
            fx.record(ev.NodeWarning(what=ev.WarningKind.SNAPSHOT_UNREADABLE,
                                 process_inst_id=process_inst_id, reason=str(exc)[:200]))
            return None
        self.instances[inst.instance_id] = inst
        fx.record(ev.InstanceRehydrated(process_inst_id=inst.instance_id, task_id=inst.task_id,
                                        status=inst.status, version=inst.version,
                                        gate_id=inst.gate_id, digest=digest(inst.context)))
        return inst

    def on_subflow_failed(self, fx: Effects, inst: Instance, sub: Subflow, why: str) -> None:
        """A failed sub-flow fails its parent: its child context is discarded."""
        fx.record(ev.SubflowFinished(process_inst_id=inst.instance_id, step=sub.step.id, ok=False,
                                     reason=why))
        inst.sub = None
        self._end(fx, inst, InstanceEvent.FAIL, f"sub-flow {sub.step.id} failed: {why}",
                  ev.InstanceCause.SUBFLOW_FAILED)

    # -- start --------------------------------------------------------------------------------
    def start(self, fx: Effects, task_id: str, agent_id: str, conversation_id: str | None,
              home_node_id: str | None, requester_agent_id: str, payload: Json) -> None:
        definition = payload.get("process") if isinstance(payload, dict) else None
        task_input = payload.get("ask") if isinstance(payload, dict) else None
        try:
            steps = parse_steps(definition)
        except ValueError as exc:
            fx.record(ev.NodeWarning(what=ev.WarningKind.BAD_PROCESS_DEFINITION, task_id=task_id, reason=str(exc)))
            self.finish(fx, task_id, False, None, f"bad process definition: {exc}")
            return
        inst = Instance(f"pi-{task_id}", task_id, agent_id, conversation_id, home_node_id,
                        requester_agent_id, definition, steps, self.fresh_context(task_input))
        inst.snapshot_id = f"{inst.instance_id}:main:v0"
        self.instances[inst.instance_id] = inst
        fx.record(ev.InstanceStarted(process_inst_id=inst.instance_id, task_id=task_id,
                                     agent_id=agent_id, definition=definition, version=0,
                                     context=deep_copy(inst.context), digest=digest(inst.context)))
        self.persist(fx, inst, "start")
        self._advance(fx, inst)

    # -- driving --------------------------------------------------------------------------------
    def _advance(self, fx: Effects, inst: Instance) -> None:
        if inst.status is not InstanceStatus.RUNNING or inst.running:
            return
        if inst.sub is not None:
            self._advance_sub(fx, inst, inst.sub)
            return
        if inst.pc >= len(inst.steps):
            self._end(fx, inst, InstanceEvent.FINISH, None, ev.InstanceCause.COMPLETED)
            return
        step = inst.steps[inst.pc]
        if step.kind is StepKind.WORK:
            self._start_attempt(fx, inst, "main", step.id, step, 1, self._snapshot(inst, "main"))
        elif step.kind is StepKind.PARALLEL:
            snap = self._snapshot(inst, "main")   # every branch from the same parent snapshot
            for b in step.inner:
                self._start_attempt(fx, inst, "main", f"{step.id}/{b.id}", b, 1, snap)
        elif step.kind is StepKind.SUBFLOW:
            sub = Subflow(step, self.copy_context(inst.context), self.copy_context(inst.context))
            sub.snapshot_id = f"{inst.instance_id}:{step.id}:v0"
            sub.parent_snapshot_id = inst.snapshot_id
            inst.sub = sub
            fx.record(ev.ContextForked(process_inst_id=inst.instance_id, scope=step.id,
                                       parent_snapshot_id=inst.snapshot_id,
                                       parent_version=inst.version, snapshot_id=sub.snapshot_id,
                                       digest=digest(sub.context)))
            self._advance_sub(fx, inst, sub)
        else:
            self._open_gate(fx, inst, step)

    def _advance_sub(self, fx: Effects, inst: Instance, sub: Subflow) -> None:
        if sub.pc < len(sub.step.inner):
            inner = sub.step.inner[sub.pc]
            self._start_attempt(fx, inst, sub.step.id, f"{sub.step.id}/{inner.id}", inner, 1,
                                self._snapshot(inst, sub.step.id))
            return
        fx.record(ev.SubflowFinished(process_inst_id=inst.instance_id, step=sub.step.id, ok=True,
                                     reason=None))
        inst.sub = None
        self._merge(fx, inst, "main", sub.step.id, 1, sub.step.merge, sub.base, sub.context, sub.ops)
        inst.pc += 1
        self._advance(fx, inst)

    def _snapshot(self, inst: Instance, scope: str) -> Snapshot:
        if scope == "main":
            return Snapshot(inst.snapshot_id, inst.version, inst.parent_snapshot_id,
                            self.copy_context(inst.context))
        sub = inst.sub
        assert sub is not None
        return Snapshot(sub.snapshot_id, sub.version, sub.parent_snapshot_id,
                        self.copy_context(sub.context))

    def _start_attempt(self, fx: Effects, inst: Instance, scope: str, path: str, step: StepDef,
                       number: int, snap: Snapshot) -> None:
        work = self.copy_context(snap.data)
        inst.running[path] = Attempt(scope, step, number, snap, work)
        fx.record(ev.StepStarted(process_inst_id=inst.instance_id, task_id=inst.task_id,
                                 scope=scope, path=path, attempt=number, retries=step.retries,
                                 snapshot_id=snap.snapshot_id, parent_snapshot_id=snap.parent_id,
                                 base_version=snap.version, base_digest=digest(work)))
        fx.add(RunStep(inst.instance_id, inst.task_id, path, number, inst.agent_id))

    def on_step_finished(self, fx: Effects, instance_id: str, path: str, number: int, ok: bool,
                         written: list[Json]) -> None:
        inst = self.instances.get(instance_id)
        attempt = inst.running.get(path) if inst is not None else None
        if inst is None or attempt is None or attempt.number != number:
            fx.record(ev.StepLate(process_inst_id=instance_id, path=path, attempt=number, ok=ok,
                                  reason="no such running attempt"))
            return
        del inst.running[path]
        ops = [op for op in written if isinstance(op, dict)]
        attempt.ops = ops
        error = None
        if len(ops) != len(written):   # a write the engine cannot read fails the attempt
            ok, error = False, f"{len(written) - len(ops)} write(s) are not objects"
        else:
            try:
                apply_ops(attempt.work, ops)   # the step wrote to its copy, then succeeded or not
            except ContextError as exc:
                ok, error = False, str(exc)
        fx.record(ev.StepFinished(process_inst_id=instance_id, scope=attempt.scope, path=path,
                                  attempt=number, ok=ok, ops=deep_copy(cast(Json, ops)),
                                  error=error))
        if inst.status is not InstanceStatus.RUNNING:
            return   # a sibling branch already failed the instance
        if not ok:
            self._failed_attempt(fx, inst, path, attempt)
            return
        if "/" in path and attempt.scope == "main":   # a parallel branch
            inst.branches_done[path] = attempt
            if inst.running:
                return
            step = inst.steps[inst.pc]
            for branch in self.merge_order(step, list(inst.branches_done)):
                done = inst.branches_done.pop(branch)
                self._merge(fx, inst, "main", branch, done.number, step.merge,
                            done.snapshot.data, done.work, done.ops)
            inst.pc += 1
        elif attempt.scope == "main":
            self._merge(fx, inst, "main", path, number, attempt.step.merge,
                        attempt.snapshot.data, attempt.work, ops)
            inst.pc += 1
        else:
            sub = inst.sub
            assert sub is not None
            self._merge(fx, inst, sub.step.id, path, number, attempt.step.merge,
                        attempt.snapshot.data, attempt.work, ops)
            sub.ops.extend(ops)
            sub.pc += 1
        self._advance(fx, inst)

    def merge_order(self, step: StepDef, finished: list[str]) -> list[str]:
        """The order a parallel step's branches (`finished`: their paths, in the order they
        finished) are merged in: the definition's, whatever order they finished in (seed
        004: with list-growing merges another order gives another context)."""
        return [f"{step.id}/{b.id}" for b in step.inner]

    def _failed_attempt(self, fx: Effects, inst: Instance, path: str, attempt: Attempt) -> None:
        fx.record(ev.AttemptDiscarded(process_inst_id=inst.instance_id, path=path,
                                      attempt=attempt.number,
                                      snapshot_id=attempt.snapshot.snapshot_id))
        if attempt.number <= attempt.step.retries:   # retry from the pre-attempt snapshot
            self._start_attempt(fx, inst, attempt.scope, path, attempt.step, attempt.number + 1,
                                attempt.snapshot)
            return
        why = f"step {path} failed after {attempt.number} attempt(s)"
        inst.running.clear()
        inst.branches_done.clear()
        if attempt.scope != "main" and inst.sub is not None:
            self.on_subflow_failed(fx, inst, inst.sub, why)
            if inst.status is InstanceStatus.RUNNING:   # a variant carried on
                self._advance(fx, inst)
            return
        self._end(fx, inst, InstanceEvent.FAIL, why, ev.InstanceCause.STEP_FAILED)

    def _merge(self, fx: Effects, inst: Instance, scope: str, path: str, attempt: int,
               operator: Merge, base: Json, result: Json, ops: list[Write]) -> None:
        """Fold a step's result into its scope's context: the instance's own ("main") or
        the running sub-flow's; either way a new version, parent-linked to the last."""
        target: Instance | Subflow | None = inst if scope == "main" else inst.sub
        assert target is not None
        before = target.version
        target.context = merge(target.context, base, result, operator)
        target.version += 1
        target.parent_snapshot_id = target.snapshot_id
        target.snapshot_id = f"{inst.instance_id}:{scope}:v{target.version}"
        fx.record(ev.ContextMerged(process_inst_id=inst.instance_id, scope=scope, path=path,
                                   attempt=attempt, operator=operator, from_version=before,
                                   version=target.version, snapshot_id=target.snapshot_id,
                                   parent_snapshot_id=target.parent_snapshot_id,
                                   ops=deep_copy(cast(Json, ops)),
                                   context=deep_copy(target.context),
                                   digest=digest(target.context)))
        if scope == "main":
            self.persist(fx, inst, "checkpoint")

    def _end(self, fx: Effects, inst: Instance, event: InstanceEvent, error: str | None,
             cause: ev.InstanceCause) -> None:
        previous = inst.move(event)
        status = inst.status
        inst.running.clear()
        self.persist(fx, inst, "end")
        fx.record(ev.InstanceState(process_inst_id=inst.instance_id, task_id=inst.task_id,
                                   status=status, previous=previous, reason=error,
                                   version=inst.version, cause=cause))
        ok = status is InstanceStatus.COMPLETED
        self.finish(fx, inst.task_id, ok,
                    {"context": deep_copy(inst.context), "version": inst.version} if ok else None,
                    error)

    def persist(self, fx: Effects, inst: Instance, reason: str) -> None:
        snap = inst.to_json()
        fx.add(PersistRecord(Table.INSTANCES, inst.instance_id, snap))
        fx.record(ev.InstancePersisted(process_inst_id=inst.instance_id,
                                       status=inst.status, version=inst.version,
                                       reason=reason, gate_id=inst.gate_id))

    # -- gates (executor side) -------------------------------------------------------------------
    def _open_gate(self, fx: Effects, inst: Instance, step: StepDef) -> None:
        gate_id = f"{inst.instance_id}:{step.id}"
        if inst.home_node_id is None:
            self._end(fx, inst, InstanceEvent.FAIL,
                      f"human step {step.id}: the request named no home node to ask",
                      ev.InstanceCause.NO_HOME_NODE)
            return
        self.pause(fx, inst, gate_id)
        fx.record(ev.InstanceState(process_inst_id=inst.instance_id, task_id=inst.task_id,
                                   status=inst.status, previous=InstanceStatus.RUNNING,
                                   reason=f"waiting at gate {gate_id}", version=inst.version,
                                   cause=ev.InstanceCause.WAITING_AT_GATE))
        env = Envelope(self.new_id(), MessageType.GATE_OPEN, inst.agent_id, fx.now_ms,
                       to_agent_id=inst.requester_agent_id, target_node_id=inst.home_node_id,
                       conversation_id=inst.conversation_id,
                       payload={"gateId": gate_id, "processInstId": inst.instance_id,
                                "activityId": step.id, "agentId": inst.agent_id,
                                "taskId": inst.task_id, "prompt": step.prompt,
                                "timeoutMs": step.timeout_ms, "onTimeout": step.on_timeout})
        fx.record(ev.GateOpenSent(gate_id=gate_id, process_inst_id=inst.instance_id,
                                  activity_id=step.id, agent_id=inst.agent_id,
                                  home_node_id=inst.home_node_id, message_id=env.message_id))
        self.send(fx, env, True)

    def on_decision(self, fx: Effects, env: Envelope, body: GateDecisionBody) -> None:
        """A GATE_DECISION: resume exactly the named instance, exactly once; always ACK."""
        gate_id, pi, decision = body.gate_id, body.process_inst_id, body.decision
        inst = self.instance_for_decision(fx, pi, env.to_agent_id)
        if inst is None:
            status = AckStatus.UNKNOWN_INSTANCE
        elif gate_id in inst.decided_gates:
            status = AckStatus.ALREADY_DECIDED
        elif inst.status is not InstanceStatus.PAUSED or not self.gate_matches(inst, gate_id):
            status = AckStatus.NOT_WAITING
        else:
            status = AckStatus.RESUMED
        fx.record(ev.GateDecisionReceived(gate_id=gate_id, process_inst_id=pi, decision=decision,
                                          status=status, message_id=env.message_id,
                                          instance_status=inst.status if inst else None))
        self._ack(fx, env, gate_id, pi, status)
        if inst is not None and status is AckStatus.RESUMED:
            self._resume(fx, inst, gate_id, decision)

    def _ack(self, fx: Effects, env: Envelope, gate_id: str, pi: str, status: AckStatus) -> None:
        ack = Envelope(self.new_id(), MessageType.GATE_ACK, env.to_agent_id or "", fx.now_ms,
                       to_agent_id=env.from_agent_id,
                       target_node_id=env.header(Header.ORIGIN_NODE_ID),
                       conversation_id=env.conversation_id,
                       payload={"gateId": gate_id, "processInstId": pi, "status": status.value})
        self.send(fx, ack, True)

    def _resume(self, fx: Effects, inst: Instance, gate_id: str, decision: Decision) -> None:
        step = inst.steps[inst.pc]
        fx.record(ev.GateResumed(gate_id=gate_id, process_inst_id=inst.instance_id,
                                 instance_gate=inst.gate_id, decision=decision,
                                 task_id=inst.task_id))
        inst.decided_gates.append(gate_id)
        if inst.gate_id is not None and inst.gate_id != gate_id:
            inst.decided_gates.append(inst.gate_id)
        inst.gate_id = None
        inst.move(InstanceEvent.RESUME)
        ops: list[Write] = [{"op": "set", "path": ["gates", step.id], "value": decision.value}]
        result = self.copy_context(inst.context)
        apply_ops(result, ops)
        self._merge(fx, inst, "main", step.id, 1, Merge.DEEP, deep_copy(inst.context), result, ops)
        if decision is Decision.APPROVE:
            inst.pc += 1
            self._advance(fx, inst)
        else:
            self._end(fx, inst, InstanceEvent.FAIL, f"gate {gate_id}: {decision.value}",
                      ev.InstanceCause.DECIDED_AGAINST)

    # -- restart -----------------------------------------------------------------------------------
    def restore(self, fx: Effects, records: dict[str, Json]) -> set[str]:
        """Read the instance snapshots back. PAUSED ones wait (dormant) for their decision and
        keep their task alive; one found RUNNING was interrupted mid-step and ends FAILED.
        Returns the task ids that stay alive."""
        waiting: set[str] = set()
        for key, raw in sorted(records.items()):
            if not isinstance(raw, dict):
                fx.record(ev.NodeWarning(what=ev.WarningKind.SNAPSHOT_UNREADABLE, process_inst_id=key,
                                     reason="not an object"))
                continue
            status = raw.get("status")
            if status == InstanceStatus.RUNNING.value:
                ended = INSTANCE.next(InstanceStatus.RUNNING, InstanceEvent.INTERRUPT, key)
                raw = {**raw, "status": ended.value}
                fx.add(PersistRecord(Table.INSTANCES, key, raw))
                task_id, version = raw.get("taskId"), raw.get("version")
                fx.record(ev.InstanceState(
                    process_inst_id=key, task_id=task_id if isinstance(task_id, str) else None,
                    status=ended, previous=InstanceStatus.RUNNING,
                    reason="interrupted: the node restarted mid-step",
                    version=version if isinstance(version, int) else None,
                    cause=ev.InstanceCause.INTERRUPTED))
            elif status == InstanceStatus.PAUSED.value and isinstance(raw.get("taskId"), str):
                waiting.add(cast(str, raw["taskId"]))
            self.dormant[key] = raw
        if records:
            fx.record(ev.InstancesRestored(snapshots=len(records), paused=len(waiting)))
        return waiting

    def on_task_gone(self, fx: Effects, task_id: str, why: str) -> None:
        """The task ended from outside (watchdog): its instance ends with it — one paused at
        a gate since a restart is still only a snapshot on disk, brought back to be ended
        (left there, a late decision would resume it for a task nobody waits for)."""
        pi = f"pi-{task_id}"
        inst = self.instances.get(pi) or self.rehydrate(fx, pi)
        if inst is not None and inst.status not in TERMINAL:
            previous = inst.move(InstanceEvent.TASK_ENDED)
            inst.running.clear()
            self.persist(fx, inst, "end")
            fx.record(ev.InstanceState(process_inst_id=inst.instance_id, task_id=task_id,
                                       status=inst.status, previous=previous,
                                       reason=why, version=inst.version,
                                       cause=ev.InstanceCause.TASK_ENDED))

