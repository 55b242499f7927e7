"""Anyone's node under test (issue 17, first part): a node started by a command of its own
speaking the node-process protocol (docs/PROTOCOL.md, part 2), beside reference nodes, and
a node process that ends by itself journaled as the crash it is. The command here is the
reference node's own module, started as any program would be: what is tested is the
plumbing, and that a foreign node's death is never lost."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.cli import EXIT_INVALID, EXIT_OK, main
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.substrates import Options
from bench.variants import REFERENCE
from tests.helpers import not_true
from tests.live.conftest import compressed

REFERENCE_COMMAND = (sys.executable, "-m", "bench.substrates.live.node_process")


def test_executors_started_by_a_command_run_beside_an_inproc_orchestrator(tmp_path: Path) -> None:
    scenario = compressed("quickstart", 4).with_node_command("executor", REFERENCE_COMMAND)
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="amqtt"))
    assert result.exit_code == EXIT_OK, not_true(result)
    assert result.metrics["outcomes"].get("COMPLETED", 0) >= 10
    assert scenario.command_nodes == ("exec-1", "exec-2", "exec-3")


def test_a_node_process_that_ends_by_itself_is_a_crash_in_the_history(tmp_path: Path) -> None:
    """The executors' command runs the reference node until it has registered, then
    SIGKILLs it and exits 1 (a foreign node dying mid-run): each is journaled as
    node_crashed with the exit status, and robustness names it — where before the history
    said nothing. (It waits for the registration, not for a time: on a loaded machine a
    node may take seconds to come up.)"""
    script = tmp_path / "dies.py"
    script.write_text(
        f"#!{sys.executable}\n"
        "import subprocess, sys, threading, time\n"
        f"node = subprocess.Popen({list(REFERENCE_COMMAND)!r}, stdout=subprocess.PIPE)\n"
        "def die():\n"
        "    time.sleep(0.5)\n"
        "    node.kill()\n"
        "for line in node.stdout:\n"
        "    sys.stdout.buffer.write(line)\n"
        "    sys.stdout.flush()\n"
        "    if b'executors_registered' in line:\n"
        "        threading.Thread(target=die).start()\n"
        "node.wait()\n"
        "sys.exit(1)\n")
    script.chmod(0o755)
    scenario = compressed("quickstart", 4).with_node_command("executor", (str(script),))
    result = run_scenario(scenario, REFERENCE, tmp_path / "run", mode="live",
                          options=Options(broker="amqtt"))
    history = (tmp_path / "run" / "history.jsonl").read_text()
    crashed = [line for line in history.splitlines() if '"node_crashed"' in line]
    assert len(crashed) == 3 and all("exit status 1" in line for line in crashed), crashed
    verdicts = {v.name: v.value.value for v in result.verdicts}
    assert verdicts["robustness"] == "false", verdicts


@pytest.mark.parametrize(("argv", "says"), [
    (["--node-command", "executor=/no/such/node"], "'/no/such/node' is not an executable"),
    (["--node-command", "janitor=/bin/true"], "role 'janitor'"),
    (["--node-command", "executor="], "an empty command"),
    (["--node-command", "executor=/bin/true", "--mode", "sim"], "--mode live only"),
    (["--node-command", "executor=/bin/true", "--mode", "docker"], "--mode live only"),
])
def test_a_node_command_the_bench_cannot_use_is_one_line_and_exit_3(
        argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "quickstart", *argv]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_a_topology_names_a_command_per_node_group(tmp_path: Path) -> None:
    topology = tmp_path / "own.toml"
    topology.write_text((SCENARIOS.parent / "topologies" / "star.toml").read_text().replace(
        'role = "executor"', 'role = "executor"\ncommand = ["/usr/local/bin/my-node", "--fast"]'))
    scenario = load_scenario(SCENARIOS / "quickstart.toml", topology=str(topology))
    assert {n.id: n.command for n in scenario.topology.nodes if n.command} == {
        f"exec-{i}": ("/usr/local/bin/my-node", "--fast") for i in (1, 2, 3)}
    topology.write_text(topology.read_text().replace('["/usr/local/bin/my-node", "--fast"]',
                                                     "[]"))
    from bench.spec.distribution import SpecError
    with pytest.raises(SpecError, match="command"):
        load_scenario(SCENARIOS / "quickstart.toml", topology=str(topology))


def test_a_node_image_is_docker_only_and_must_be_on_the_engine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topology = tmp_path / "own.toml"
    topology.write_text((SCENARIOS.parent / "topologies" / "star.toml").read_text().replace(
        'role = "executor"', 'role = "executor"\nimage = "no-such-node:never-built"'))
    assert main(["run", "quickstart", "--topology", str(topology), "--mode", "live"]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "--mode docker only" in err and len(err.strip().splitlines()) == 1, err
    try:
        from bench.substrates.docker.deployment import engine
        engine()
    except Exception:  # noqa: BLE001 - no engine: the docker substrate says so itself
        return
    assert main(["run", "quickstart", "--topology", str(topology), "--mode", "docker"]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "'no-such-node:never-built'" in err and "not on this Docker engine" in err, err
    assert len(err.strip().splitlines()) == 1, err
