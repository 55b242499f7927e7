"""A third-party MQTT 5 broker judged as the bench judges its own: moat-lib-mqtt 0.8.7's
broker (PyPI; a sans-IO MQTT 5 client and broker), evaluated as the zero-setup v5 default
and not adopted. What it breaks is pinned here (expected FALSE on this version, so a
release that fixes one is noticed), each seen two ways: by the bench's raw v5 client
(`a2a-bench brokers`) and as a verdict of a run of the reference nodes on it.
docs/findings/moat-lib-mqtt.md has the commands and the clauses."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bench.run import EXIT_INVALID, run_scenario
from bench.spec.topology import MqttVersion
from bench.substrates import Options
from bench.substrates.live.brokers import free_port, wait_listening
from bench.variants import REFERENCE
from tests.live.conftest import compressed, partitioned

pytest.importorskip("moat.lib.mqtt", reason="moat-lib-mqtt is a test dependency (.[test])")

SERVE = ("import anyio, sys; from moat.lib.mqtt.async_broker import AsyncMQTTBroker; "
         "anyio.run(AsyncMQTTBroker(bind_address=('127.0.0.1', int(sys.argv[1]))).serve)")


@pytest.fixture(scope="module")
def moat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = (tmp_path_factory.mktemp("moat") / "broker.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(port)], stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        wait_listening("127.0.0.1", port, 20.0, proc, None)
        yield f"mqtt://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        log.close()


def test_its_facts_measured_by_a_raw_client(moat: str, tmp_path: Path) -> None:
    from bench.substrates.live.facts import measure
    facts = {f.name: f.value for f in measure(moat, tmp_path)}
    assert facts["v3.1.1"] == "refused" and facts["v5"] == "accepted"
    assert facts["session_expiry"] == "not kept; gone after it"     # [MQTT-3.1.2-23]
    assert facts["will_delay"].startswith("will never")              # [MQTT-3.1.2-8]
    assert facts["request_response"] == "changed (defect)"           # [MQTT-3.3.2-15], -16
    assert facts["user_properties"] == "changed (defect)"            # [MQTT-3.3.2-18]
    assert facts["shared_subscription"].startswith("not once per group (defect)")
    assert facts["receive_maximum"].startswith("5 in flight (defect)")   # [MQTT-3.3.4-9]
    assert facts["retained_properties"] == "lost (defect)"


def test_a_session_it_was_asked_to_keep_is_gone_after_a_restart(moat: str, tmp_path: Path) -> None:
    """restart: exec-1 is killed and back 2 s later, well inside the 600 s Session Expiry
    Interval it asked for; the broker kept no session ([MQTT-3.1.2-23]), and what it had
    queued for exec-1 is lost."""
    scenario = replace(compressed("restart", 8), mqtt=MqttVersion.V5)
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker=moat))
    qos1 = next(v for v in result.verdicts if v.name == "qos1_delivery")
    assert qos1.value.value == "false"
    assert qos1.rules["session_kept_as_promised"]["violations"] == 1


def test_a_partitioned_client_is_never_given_up(moat: str, tmp_path: Path) -> None:
    scenario = replace(partitioned(20), mqtt=MqttVersion.V5)
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker=moat))
    deployment = next(v for v in result.verdicts if v.name == "deployment")
    assert deployment.value.value == "false"
    assert deployment.rules["gives_up_a_silent_client"]["violations"] == 1


def test_a_3_1_1_run_on_it_is_refused_in_one_line(moat: str, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli import main
    assert main(["run", "quickstart", "--broker", moat, "--no-plots"]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not speak MQTT 3.1.1" in err[0] \
        and "run with --mqtt 5" in err[0], err
