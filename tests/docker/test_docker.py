"""The docker substrate: the broker and every node in containers on a network of the run's
own, judged from the same history as live and sim. Needs a Docker Engine (.ci/run builds
the image first); without one these tests skip, except under CI, where they fail."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.run import EXIT_OK, run_scenario
from bench.spec.scenario import SCENARIOS, Mode, load_scenario
from bench.substrates import Options
from bench.variants import REFERENCE, VARIANTS
from tests.helpers import not_true
from tests.live.conftest import compressed, partitioned


def _engine() -> object | None:
    try:
        from bench.substrates.docker.deployment import engine
        return engine()
    except Exception:  # noqa: BLE001 - no engine, in any way
        return None


ENGINE = _engine()
pytestmark = pytest.mark.skipif(ENGINE is None and not os.environ.get("CI"),
                                reason="no Docker Engine answers (DOCKER_HOST or the local socket)")


@pytest.fixture(autouse=True)
def _engine_turn(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A test that makes a swarm changes the engine's networking (swarm init and leave):
    it runs alone, while every other docker test may run beside the others (xdist
    workers share a lock file)."""
    import fcntl
    import tempfile
    with open(Path(tempfile.gettempdir()) / "a2a-bench-docker-tests.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if "swarm" in request.fixturenames else fcntl.LOCK_SH)
        yield


def leftovers() -> list[str]:
    """What this test process's runs left, or a run whose bench is gone (a matrix's
    subprocess): not the runs other xdist workers have up right now."""
    from bench.substrates.docker.deployment import PID, RUN, _bench_alive
    client = ENGINE
    assert client is not None

    def left(labels: dict[str, str]) -> bool:
        return labels.get(PID) == str(os.getpid()) or not _bench_alive(labels.get(PID, ""))
    # the engine's own listing: the SDK's `containers.list` inspects each container, and one
    # another worker's run removed meanwhile is a 404 (seen under load, ten workers)
    found = [(c.get("Names") or [c["Id"]])[0].lstrip("/")
             for c in client.api.containers(all=True, filters={"label": RUN})  # type: ignore[attr-defined]
             if left(c.get("Labels") or {})]
    found += [n.name for n in client.networks.list(filters={"label": RUN})  # type: ignore[attr-defined]
              if left(n.attrs.get("Labels") or {})]
    return found


@pytest.mark.parametrize("broker", ["amqtt", "mosquitto"])
def test_the_quickstart_runs_in_containers_and_leaves_nothing_behind(tmp_path: Path,
                                                                    broker: str) -> None:
    result = run_scenario(compressed("quickstart", 4), REFERENCE, tmp_path, mode=Mode.DOCKER,
                          options=Options(broker=broker))
    assert result.exit_code == EXIT_OK, not_true(result)
    assert result.summary["nodes"] == "container" and result.metrics["outcomes"]["COMPLETED"]
    assert not leftovers()


@pytest.mark.parametrize("point", ["workload", "down", "healed"])
def test_ctrl_c_anywhere_in_a_docker_run_is_never_a_verdict(tmp_path: Path, point: str) -> None:
    """Issue 50: Ctrl-C on a docker run exited 1 — the nodes stop one container after
    another, and executors answering the orchestrator already stopped counted as losses."""
    from tests.live.test_interrupted import ctrl_c_at
    ctrl_c_at(tmp_path / "run", point, ("--mode", "docker"))
    assert not leftovers()


def test_a_restart_kills_the_container_and_starts_it_again_on_its_data_dir(tmp_path: Path) -> None:
    result = run_scenario(compressed("restart", 8), REFERENCE, tmp_path, mode=Mode.DOCKER,
                          options=Options(broker="mosquitto"))
    assert result.exit_code == EXIT_OK, not_true(result)
    history = (tmp_path / "history.jsonl").read_text()
    assert '"how":"SIGKILL (docker kill)"' in history and '"restarted"' in history
    assert not leftovers()


def test_an_mqtt_5_session_expires_in_containers_as_live_and_in_simulation(tmp_path: Path) -> None:
    """session_expired: the broker container speaks v5, exec-1's container is down past the
    2 s Session Expiry Interval it asked for and comes back to no session; what the expired
    session held is lost with that explanation (qos1_delivery), and nothing is silent."""
    result = run_scenario(compressed("session_expired", 12), REFERENCE, tmp_path,
                          mode=Mode.DOCKER, options=Options(broker="mosquitto"))
    assert result.exit_code == EXIT_OK, not_true(result)
    counts = {v.name: v.counts for v in result.verdicts}
    assert counts["deployment"]["away_past_expiry"] == 1
    assert counts["qos1_delivery"]["session_expired"] == 1
    assert '"mqtt":"5"' in (tmp_path / "history.jsonl").read_text()
    assert not leftovers()


def test_the_a2a_profiles_responder_killed_in_its_container_keeps_every_rule(
        tmp_path: Path) -> None:
    """a2a_restart in containers: tax-1's container is killed for 20 s with tasks running,
    the requester retries under the same Task.id, and the restarted responder answers from
    its Task.id table on its data dir: nothing runs twice, every request settles."""
    result = run_scenario(load_scenario(SCENARIOS / "a2a_restart.toml"), REFERENCE, tmp_path,
                          mode=Mode.DOCKER, options=Options(broker="mosquitto"))
    assert result.exit_code == EXIT_OK, not_true(result)
    history = (tmp_path / "history.jsonl").read_text()
    assert '"how":"SIGKILL (docker kill)"' in history and '"protocol":"a2a-mqtt"' in history
    assert not leftovers()


def test_the_a2a_profiles_responder_stopped_by_docker_stop_says_offline_before_it_goes(
        tmp_path: Path) -> None:
    """a2a_graceful_restart in containers, every agent tapped: `docker stop` (SIGTERM) of
    tax-1 mid-run reaches the node process as the container's first process, which leaves
    gracefully — its card offline before its DISCONNECT — well before docker's 10 s SIGKILL."""
    scenario = compressed("a2a_graceful_restart", 10)
    result = run_scenario(scenario, REFERENCE, tmp_path, mode=Mode.DOCKER,
                          options=Options(broker="mosquitto", wire_tap=True))
    [session] = [v for v in result.verdicts if v.name == "a2a_session"]
    assert session.value.value == "true" and session.counts["graceful_leaves"] >= 2, \
        session.counts
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    [stop] = [e for e in lines if e["kind"] == "node_crashed" and e["node"] == "tax-1"]
    began = next(e for e in lines
                 if e["kind"] == "fault_start" and e["params"].get("node") == "tax-1")
    assert stop["how"].startswith("SIGTERM (docker stop") and stop["tMs"] - began["tMs"] < 5_000
    assert not leftovers()


def test_a_seeded_defect_fails_in_docker_as_in_simulation(tmp_path: Path) -> None:
    defect = VARIANTS["memory_dedup_60s"]
    scenario = compressed(defect.scenario, 8)
    result = run_scenario(scenario, defect, tmp_path, mode=Mode.DOCKER,
                          options=Options(broker="amqtt"))
    verdicts = {v.name: v.value.value for v in result.verdicts}
    assert verdicts[defect.caught_by] == "false", verdicts


def test_a_broker_container_whose_port_was_taken_since_it_was_chosen_publishes_another(
        tmp_path: Path) -> None:
    """A full suite beside a fast-lane loop: "Error starting userland proxy: listen tcp4
    127.0.0.1:60627: bind: address already in use" — another run took the port the broker's
    container was to publish. Its first start takes another, as a process broker's does."""
    import socket

    from bench.substrates.docker.deployment import DockerBroker
    from bench.substrates.docker.image import LABEL, ensure
    client = ENGINE
    assert client is not None
    name = f"a2a-bench-porttest{os.getpid()}"
    net = client.networks.create(name, labels={LABEL: "test"})  # type: ignore[attr-defined]
    broker = DockerBroker("amqtt", tmp_path / "broker", client, ensure(client), name,
                          {LABEL: "test"}, f"{name}-broker")
    try:
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", broker.port))
            squatter.listen()
            taken = broker.port
            broker.start()
            assert broker.port != taken
    finally:
        import contextlib
        broker.stop()
        with contextlib.suppress(Exception):
            broker.container.remove(force=True)
        net.remove()


def test_what_a_dead_run_left_is_removed_by_the_next(tmp_path: Path) -> None:
    from bench.substrates.docker.deployment import LABEL, PID, RUN, sweep
    client = ENGINE
    assert client is not None
    net = client.networks.create("a2a-bench-deadbeef", labels={  # type: ignore[attr-defined]
        LABEL: "run", RUN: "deadbeef", PID: "999999999"})
    try:
        assert sweep(client) >= 1
        assert "a2a-bench-deadbeef" not in leftovers()
    finally:
        import contextlib
        with contextlib.suppress(Exception):
            net.remove()


# (puback_refused on 16 s: the proxy's draws for orch-1 at seed 1 first fall under its
# 0.3 at the 17th QoS1 publish in the window, and a loaded machine published 12 in the 3.2 s
# an 8 s run gives it — the fault never fired and every verdict said UNKNOWN; CI 2026-12-06)
@pytest.mark.parametrize(("name", "seconds"), [("pause", 8), ("latency", 8), ("loss", 8),
                                               ("puback_refused", 16),
                                               ("partition", 20)])
def test_faults_by_the_engine_and_through_the_gateway_proxy_give_the_expected_verdicts(
        tmp_path: Path, name: str, seconds: float) -> None:
    """pause is the cgroup freezer (docker pause); latency, loss and partition go through
    the fault proxy, listening on the run network's gateway for the containers."""
    scenario = partitioned(seconds) if name == "partition" else compressed(name, seconds)
    result = run_scenario(scenario, REFERENCE, tmp_path, mode=Mode.DOCKER,
                          options=Options(broker="mosquitto"))
    wrong = {v.name: (v.value.value, v.counterexamples[:1]) for v in result.verdicts
             if v.value.value != result.summary["expect"].get(v.name, "true")}
    assert not wrong
    fired = [line for line in (tmp_path / "history.jsonl").read_text().splitlines()
             if '"fault_fired"' in line]
    assert fired, "the fault never fired"
    if name == "pause":
        assert "docker pause" in "".join(fired)
    assert not leftovers()


def test_deploy_writes_a_compose_file_that_comes_up_and_goes_down(tmp_path: Path) -> None:
    """`a2a-bench deploy star --compose FILE`: Compose accepts it, every node comes up and
    registers on the broker it names, and `down` leaves nothing."""
    import shutil
    import subprocess
    import time

    from bench.cli import main
    tool = ["docker-compose"] if shutil.which("docker-compose") else ["docker", "compose"]
    path = tmp_path / "star.yml"
    from bench.substrates.live.brokers import free_port
    assert main(["deploy", "star", "--broker", "mosquitto", "--compose", str(path),
                 "--port", str(free_port())]) == EXIT_OK
    config = subprocess.run([*tool, "-f", str(path), "config"], capture_output=True, text=True)
    if config.returncode and "unknown command" in config.stderr:
        pytest.skip("neither docker-compose nor the compose plugin is installed")
    assert config.returncode == 0, config.stderr
    try:
        subprocess.run([*tool, "-f", str(path), "up", "-d"], check=True, capture_output=True)
        deadline = time.monotonic() + 60      # four nodes start and register on a loaded box
        logs = ""
        while time.monotonic() < deadline and logs.count("executors_registered") < 4:
            logs = subprocess.run([*tool, "-f", str(path), "logs", "--no-color"],
                                  capture_output=True, text=True).stdout
            time.sleep(0.5)
        assert logs.count('"kind":"executors_registered"') >= 4, logs[-2000:]
    finally:
        subprocess.run([*tool, "-f", str(path), "down"], capture_output=True, timeout=120)
    ours = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project="
                           f"{tmp_path.name.lower()}"], capture_output=True, text=True).stdout
    assert not ours.strip()


def test_a_matrix_runs_docker_cells_and_compare_puts_the_three_substrates_side_by_side(
        tmp_path: Path) -> None:
    """modes = ["sim", "live", "docker"]: one scenario on the three substrates, and
    `compare` on the matrix shows them in one table, each against the simulation."""
    import subprocess
    import sys
    (tmp_path / "three.matrix.toml").write_text(
        '[[group]]\nscenarios = ["quickstart"]\nmodes = ["sim", "live", "docker"]\n'
        'brokers = ["mosquitto"]\n')
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    done = subprocess.run([sys.executable, "-m", "bench", "matrix", "three.matrix.toml"],
                          cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:]
    cells = sorted(p.name for p in (tmp_path / "results" / "three" / "cells").iterdir())
    assert cells == ["quickstart.reference.own.s1.docker.mosquitto",
                     "quickstart.reference.own.s1.live.mosquitto",
                     "quickstart.reference.own.s1.sim.mosquitto"], cells
    out = subprocess.run([sys.executable, "-m", "bench", "compare", "results/three"],
                         cwd=tmp_path, env=env, text=True, capture_output=True).stdout
    assert "docker/mosquitto" in out and "live/mosquitto/inproc" in out and "sim/mosquitto" in out
    assert not leftovers()


def test_an_unplugged_cable_takes_the_container_off_the_network_and_back(tmp_path: Path) -> None:
    """partition with how = "unplug": docker network disconnect, then connect at the heal;
    the verdicts are the blackhole's."""
    from dataclasses import replace
    scenario = partitioned(20)
    fault = scenario.faults[0]
    scenario = replace(scenario, faults=(replace(fault, params={**fault.params,
                                                                "how": "unplug"}),))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode=Mode.DOCKER,
                          options=Options(broker="mosquitto"))
    wrong = {v.name: (v.value.value, v.counterexamples[:1]) for v in result.verdicts
             if v.value.value != result.summary["expect"].get(v.name, "true")}
    assert not wrong
    history = (tmp_path / "history.jsonl").read_text()
    assert '"network disconnected (unplugged)"' in history and '"network connected"' in history
    assert not leftovers()


def test_keep_leaves_the_deployment_up_and_says_how_to_remove_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--keep`: the run is judged as ever; then the broker is still up on the port it
    prints, every node runs again on its data dir (registered on that broker), a later
    run's sweep of dead runs leaves it alone, and the printed command removes it all."""
    import subprocess
    import time

    from bench.cli import main
    from bench.substrates.docker.deployment import RUN, sweep
    assert main(["run", "quickstart", "--mode", "docker", "--broker", "mosquitto", "--keep",
                 "--no-plots", "--out", str(tmp_path / "run")]) == EXIT_OK
    err = capsys.readouterr().err
    kept = next(line for line in err.splitlines() if "kept: broker" in line)
    remove = next(line for line in err.splitlines() if "remove it: " in line)
    run = kept.split("container a2a-bench-")[1].split("-broker")[0]
    client = ENGINE
    assert client is not None
    try:
        ours = client.containers.list(filters={"label": f"{RUN}={run}"})  # type: ignore[attr-defined]
        assert len(ours) == 5, [c.name for c in ours]   # the broker and four nodes, running
        sweep(client)          # what dead runs left: not a kept deployment
        assert len(client.containers.list(filters={"label": f"{RUN}={run}"})) == 5  # type: ignore[attr-defined]
        deadline = time.monotonic() + 60     # four nodes start and register on a loaded box
        logs = ""
        while time.monotonic() < deadline and logs.count("executors_registered") < 4:
            logs = "".join(c.logs().decode() for c in client.containers.list(  # type: ignore[attr-defined]
                filters={"label": f"{RUN}={run}"}) if not c.name.endswith("-broker"))
            time.sleep(0.5)
        assert logs.count('"kind":"executors_registered"') >= 4, logs[-2000:]
    finally:
        subprocess.run(remove.split("remove it: ", 1)[1], shell=True, capture_output=True,
                       timeout=120)
    assert not client.containers.list(all=True, filters={"label": f"{RUN}={run}"})  # type: ignore[attr-defined]
    assert not client.networks.list(filters={"label": f"{RUN}={run}"})  # type: ignore[attr-defined]


@pytest.fixture
def swarm():  # type: ignore[no-untyped-def]
    """A one-node swarm: the engine's, or one made here (advertised on this host's first
    global address) and left again afterwards."""
    import subprocess
    client = ENGINE
    assert client is not None
    if (client.info().get("Swarm") or {}).get("LocalNodeState") == "active":  # type: ignore[attr-defined]
        yield
        return
    addrs = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                           capture_output=True, text=True).stdout.split("\n")
    addr = next((line.split()[3].split("/")[0] for line in addrs if line.strip()
                 and not line.split()[1].startswith(("docker", "br-", "veth"))), None)
    if addr is None:
        pytest.skip("no global IPv4 address to advertise a swarm on")
    had_gwbridge = bool(client.networks.list(names=["docker_gwbridge"]))  # type: ignore[attr-defined]
    made = subprocess.run(["docker", "swarm", "init", "--advertise-addr", addr],
                          capture_output=True, text=True)
    if made.returncode:
        pytest.skip(f"docker swarm init failed: {made.stderr.strip()[:200]}")
    try:
        yield
    finally:
        subprocess.run(["docker", "swarm", "leave", "--force"], capture_output=True, timeout=60)
        if not had_gwbridge:   # made for the overlay; a network costs one of ~30 pools
            subprocess.run(["docker", "network", "rm", "docker_gwbridge"], capture_output=True)


def test_on_a_swarm_the_run_network_is_an_overlay_and_the_proxy_faults_reach_it(
        tmp_path: Path, swarm: None) -> None:
    """--swarm: the broker and nodes on an attachable overlay network (the driver a
    multi-host deployment uses), the fault proxies reached through docker_gwbridge; the
    latency scenario judged as on a bridge, and nothing left behind."""
    from bench.substrates.docker.deployment import RUN
    scenario = compressed("latency", 8)
    seen: list[str] = []

    def look(_line: str) -> None:
        for net in ENGINE.networks.list(filters={"label": RUN}):  # type: ignore[attr-defined]
            seen.append(net.attrs.get("Driver", ""))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode=Mode.DOCKER,
                          options=Options(broker="mosquitto", swarm=True), say=look)
    wrong = {v.name: (v.value.value, v.counterexamples[:1]) for v in result.verdicts
             if v.value.value != result.summary["expect"].get(v.name, "true")}
    assert not wrong
    assert "overlay" in seen
    history = (tmp_path / "history.jsonl").read_text()
    assert '"fault_fired"' in history and '"kind":"fault_proxy"' in history
    assert not leftovers()


def test_what_the_engine_will_not_remove_is_said_with_the_command_that_removes_it() -> None:
    """A network the engine keeps refusing to remove (its endpoints never freed) is not
    dropped silently: after 5 s of retries the sweep says which, and how by hand."""
    import docker

    from bench.substrates.docker.deployment import LABEL, PID, RUN, sweep

    class Stuck:
        name = "a2a-bench-stuck"
        attrs = {"Labels": {LABEL: "run", RUN: "stuck", PID: "999999999"}}

        def remove(self) -> None:
            raise docker.errors.APIError("network has active endpoints")

    class Engine:
        class api:  # noqa: N801 - the SDK's attribute name: the engine's own listing
            @staticmethod
            def containers(**_kw: object) -> list[object]:
                return []

        class networks:  # noqa: N801
            @staticmethod
            def list(**_kw: object) -> list[object]:
                return [Stuck()]
    said: list[str] = []
    assert sweep(Engine(), "stuck", said.append) == 0
    assert said == ["could not remove network a2a-bench-stuck (network has active endpoints); "
                    "by hand: docker network rm a2a-bench-stuck"], said


def test_a_node_of_its_own_image_runs_as_the_executors_of_a_docker_deployment(
        tmp_path: Path) -> None:
    """image = "…" on a topology's node group (issue 17): the Rust node of examples/, in an
    image built FROM the bench's own, is every executor; its stdin and stdout are the
    container's, attached, and its wire is tapped as any foreign node's."""
    from tests.live.test_rust_node import RUST_NODE
    if not RUST_NODE.exists():
        pytest.skip("the Rust node is not built (cargo build --release in examples/rust-node)")
    from bench.spec.scenario import SCENARIOS, load_scenario
    from bench.substrates.docker.image import LABEL, ensure
    client = ENGINE
    base = ensure(client)
    tag = "a2a-bench-rust-node:test"
    client.images.build(path=str(RUST_NODE.parents[2]), tag=tag, buildargs={"BASE": base},  # type: ignore[attr-defined]
                        labels={LABEL: "example"}, rm=True)
    topology = tmp_path / "star-rust.toml"
    topology.write_text((SCENARIOS.parent / "topologies" / "star.toml").read_text().replace(
        'role = "executor"', f'role = "executor"\nimage = "{tag}"'))
    scenario = load_scenario(SCENARIOS / "quickstart.toml", topology=str(topology)).squeezed(4)
    assert scenario.image_nodes == ("exec-1", "exec-2", "exec-3")
    result = run_scenario(scenario, REFERENCE, tmp_path / "run", mode=Mode.DOCKER,
                          options=Options(broker="mosquitto"), topology_overridden=True)
    verdicts = {v.name: v.value.value for v in result.verdicts}
    assert result.exit_code == EXIT_OK, verdicts
    assert verdicts["wire_evidence"] == "true" and verdicts["gate_integrity"] == "unknown"
    assert result.metrics["outcomes"].get("COMPLETED", 0) >= 10
    assert leftovers() == []


def test_the_emqx_sdks_agents_against_each_other_in_containers(tmp_path: Path) -> None:
    """SDK against SDK in docker: its requester and both responders as containers of images
    built FROM the bench's own (whose venv holds the SDK as pyproject.toml pins it), behind
    their adapters (examples/emqx-sdk); judged from their wire taps as live, the same
    finding on its session, and nothing left behind."""
    import a2a_over_mqtt  # noqa: F401 - the pinned SDK is a test extra

    from bench.substrates.docker.image import LABEL, ensure
    client = ENGINE
    base = ensure(client)
    folder = Path(__file__).resolve().parents[2] / "examples" / "emqx-sdk"
    tags = {}
    for role in ("requester", "responder"):
        tags[role] = f"a2a-bench-emqx-sdk-{role}:test"
        client.images.build(path=str(folder), tag=tags[role],  # type: ignore[attr-defined]
                            buildargs={"BASE": base, "ROLE": role}, labels={LABEL: "example"},
                            rm=True)
    topology = tmp_path / "a2a-pair-sdk.toml"
    text = (SCENARIOS.parent / "topologies" / "a2a-pair.toml").read_text()
    for role, tag in tags.items():
        text = text.replace(f'role = "{role}"', f'role = "{role}"\nimage = "{tag}"')
    topology.write_text(text)
    scenario = load_scenario(SCENARIOS / "a2a_quickstart.toml",
                             topology=str(topology)).squeezed(5)
    assert scenario.image_nodes == ("client-1", "tax-1", "tax-2")
    result = run_scenario(scenario, REFERENCE, tmp_path / "run", mode=Mode.DOCKER,
                          options=Options(broker="mosquitto"), topology_overridden=True)
    verdicts = {v.name: v for v in result.verdicts}
    assert result.metrics["outcomes"].get("COMPLETED", 0) >= 5, result.metrics["outcomes"]
    for name in ("duplicate_execution", "a2a_requests", "a2a_replies"):
        assert verdicts[name].value.value == "true", (name, verdicts[name].counterexamples[:2])
    assert {c["rule"] for c in verdicts["a2a_session"].counterexamples} == {
        "connects_with_a_persistent_session"}
    assert leftovers() == []


def test_conform_judges_an_implementation_as_its_container_image(tmp_path: Path) -> None:
    """Issue 46: `conform --image`: the EMQX SDK's responder as a container of an image
    built FROM the bench's (examples/emqx-sdk/Dockerfile), one run of the suite: the table,
    compatibility.json naming the image, its replay with --image; an image the engine does
    not have is one line and exit 3 (test_conform.py has the flags)."""
    import a2a_over_mqtt  # noqa: F401 - the pinned SDK is a test extra

    from bench.cli import main
    from bench.substrates.docker.image import LABEL, ensure
    base = ensure(ENGINE)
    tag = "a2a-bench-emqx-sdk-responder:test"
    ENGINE.images.build(path=str(Path(__file__).resolve().parents[2] / "examples" / "emqx-sdk"),
                        tag=tag, buildargs={"BASE": base, "ROLE": "responder"},
                        labels={LABEL: "example"}, rm=True)
    out = tmp_path / "conform"
    code = main(["conform", "--profile", "a2a-mqtt", "--image", tag, "--only", "a2a_quickstart",
                 "--impl-version", "a2a-over-mqtt 0.1.0", "--out", str(out)])
    assert code in (1, 2), code    # the SDK's findings, or rows no run of one judged
    report = json.loads((out / "compatibility.json").read_text())
    assert report["implementation"] == {"command": [], "image": tag,
                                        "version": "a2a-over-mqtt 0.1.0"}
    by = {tuple(c["ids"]): c for c in report["clauses"]}
    ident = by[("A2M-SESS-3", "A2M-ID-1")]
    assert ident["status"] == "PASS" and ident["replay"].endswith(f"--image {tag}")
    assert '"nodes":"container"' in (out / "a2a_quickstart" / "history.jsonl").read_text() \
        or json.loads((out / "a2a_quickstart" / "summary.json").read_text())["nodes"] \
        == "container"
    assert main(["conform", "--profile", "a2a-mqtt", "--image", "a2a-bench-no-such:0"]) == 3
    assert leftovers() == []



def test_parleys_library_in_containers_through_a_handler_kill(tmp_path: Path) -> None:
    """Issue 49: Parley's commander and handler as containers of images built FROM the
    bench's own (examples/parley/Dockerfile: its venv holds parley-mqtt as pinned), set by
    `run --node-image`; the handler killed (SIGKILL: the container) with commands running and
    back 20 s later; judged from the wire taps as live: every Parley verdict TRUE, the
    liveness outcomes of the kill on record, the replay naming the images."""
    import parley  # noqa: F401 - the pinned library is a test extra

    from bench.cli import main
    from bench.substrates.docker.image import LABEL, ensure
    base = ensure(ENGINE)
    folder = Path(__file__).resolve().parents[2] / "examples" / "parley"
    flags = []
    for role in ("commander", "handler"):
        tag = f"a2a-bench-parley-{role}:test"
        ENGINE.images.build(path=str(folder), tag=tag,  # type: ignore[attr-defined]
                            buildargs={"BASE": base, "ROLE": role}, labels={LABEL: "example"},
                            rm=True)
        flags += ["--node-image", f"{role}={tag}"]
    out = tmp_path / "run"
    code = main(["run", "parley_restart", "--mode", "docker", *flags, "--out", str(out)])
    assert code == EXIT_OK
    verdicts = json.loads((out / "verdicts.json").read_text())
    verdicts = verdicts["verdicts"] if isinstance(verdicts, dict) else verdicts
    assert {v["name"]: v["value"] for v in verdicts} == {
        "parley_commander": "true", "parley_handler": "true", "parley_envelope": "true"}
    commander = next(v for v in verdicts if v["name"] == "parley_commander")
    assert commander["counts"].get("executionStale", 0) + commander["counts"].get("noAck", 0) > 0
    assert "--node-image handler=a2a-bench-parley-handler:test" in \
        json.loads((out / "summary.json").read_text())["replay"]
    assert leftovers() == []
