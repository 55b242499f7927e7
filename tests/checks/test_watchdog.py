"""The task watchdog and the instance it stops, judged on two seeded defects.

`stuck_agent` has agents that hang: only each executor's watchdog ends those tasks. A node
whose watchdog never fires (the mutant `on_watchdog` returning for a running task) holds
them RUNNING for ever; one whose watchdog forgets the task's instance leaves it to run on,
or to wait at its gate, for a task nobody waits for. The reference is TRUE on both rules.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.checks import Value
from bench.core.effects import Effects
from bench.protocols.seed.node import Node
from bench.protocols.seed.process import ProcessEngine
from bench.protocols.seed.task import TaskService
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.variants import REFERENCE, Variant


class WatchdogNeverFires(Node):
    """The watchdog's firing is taken for a late one: a hung task stays RUNNING."""

    class _Deaf(TaskService):
        def on_watchdog(self, fx: Effects, task_id: str) -> None:
            return

    task_service_class = _Deaf


class InstanceOutlivesItsTask(Node):
    """The watchdog ends the task and leaves its instance as it was."""

    class _Forgetful(ProcessEngine):
        def on_task_gone(self, fx: Effects, task_id: str, why: str) -> None:
            return

    process_engine_class = _Forgetful


@pytest.mark.parametrize(("node", "checker", "rule"), [
    (WatchdogNeverFires, "task_lifecycle", "times_out_on_time"),
    (InstanceOutlivesItsTask, "context_isolation", "ends_with_its_task"),
])
def test_a_defective_watchdog_fails_its_rule_where_the_reference_passes(
        tmp_path: Path, node: type[Node], checker: str, rule: str) -> None:
    scenario = load_scenario(SCENARIOS / "stuck_agent.toml")
    ref = {v.name: v for v in run_scenario(scenario, REFERENCE, tmp_path / "ref",
                                           mode="sim").verdicts}
    defect = Variant(node.__name__, node, "DESIGN §3 Tasks", checker, "stuck_agent")
    bad = {v.name: v for v in run_scenario(scenario, defect, tmp_path / "bad",
                                           mode="sim").verdicts}
    assert ref[checker].value is Value.TRUE, ref[checker].counterexamples[:2]
    assert bad[checker].value is Value.FALSE and bad[checker].rules[rule]["violations"], \
        bad[checker].rules
