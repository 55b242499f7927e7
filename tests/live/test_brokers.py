"""What each broker does where MQTT 3.1.1 leaves room, measured with raw clients
(`a2a-bench brokers`), held against the simulator's row for each of the two brokers the
bench ships with (`bench.spec.brokers.BEHAVIOURS`: the broker table of docs/findings/brokers-amqtt-mosquitto.md is this
output, and `--mode sim --broker X` predicts X from that row) — and run against an external broker given by URL, with
credentials and a restart command, as a user would point it at theirs."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.cli import EXIT_FALSE, EXIT_INVALID, EXIT_OK, main
from bench.spec.brokers import BEHAVIOURS, BrokerBehaviour, SharedInFlight, TakeoverWill
from bench.substrates.live.brokers import free_port, wait_listening
from bench.substrates.live.facts import KEEPALIVE_S, measure
from tests.live.conftest import MOSQUITTO, brokers


def facts_of(row: BrokerBehaviour) -> dict[str, str]:
    """What `a2a-bench brokers` must measure on a broker the simulator models by `row`."""
    return {
        "redelivery": "resent, DUP=1" if row.resends_on_resume else "not resent",
        "takeover_will": {TakeoverWill.NONE: "none", TakeoverWill.OLD: "the old client's",
                          TakeoverWill.NEW: "the new client's (defect)"}[row.takeover_will],
        "overlapping_filters": "2 copies" if row.copy_per_filter else "1 copy",
        "persistence": "session and queued message kept" if row.persistent else "nothing kept",
        "shutdown_wills": "published" if row.wills_on_shutdown else "none",
        "retain_flags": "established RETAIN=0; new RETAIN=1",
        "subscribe_while_connecting": "not always acknowledged (defect)"
        if row.subscribe_races_connect else "acknowledged",
        **({"keepalive": "never", "keepalive_receiving": "never"}
           if row.keepalive_close is None else {}),
        **v5_facts_of(row),
    }


def v5_facts_of(row: BrokerBehaviour) -> dict[str, str]:
    """The MQTT 5 rows (facts5.py) a broker modelled by `row` must measure."""
    v5 = row.v5
    if v5 is None:
        return {"v5": "refused"}
    shared = ("one member each; a dropped member's in-flight: "
              + {SharedInFlight.SESSION: "kept for its session",
                 SharedInFlight.OTHER_MEMBER: "sent to the other member",
                 SharedInFlight.LOST: "lost"}[v5.shared_in_flight]
              + "; on $ topics: "
              + ("works" if v5.shared_on_dollar_topics else "not delivered (PUBACK 0x10)"))
    return {
        "v5": "accepted",
        "session_expiry": "kept within it; gone after it" if v5.session_expiry else "?",
        "message_expiry": "expired dropped; the rest counts down" if v5.message_expiry else "?",
        "user_properties": "kept in order" if v5.properties_kept else "changed (defect)",
        "request_response": "passed unchanged" if v5.properties_kept else "changed (defect)",
        "retained_properties": "kept" if v5.properties_kept else "lost (defect)",
        "puback_no_subscribers": {0: "0x00 success",
                                  0x10: "0x10 no matching subscribers"}[v5.no_subscribers_reason],
        "receive_maximum": "2 in flight; the rest after the acks" if v5.receive_maximum else "?",
        **({"shared_subscription": shared} if v5.shared else {}),
    }


@pytest.mark.parametrize("kind", brokers())
def test_each_broker_does_what_the_simulators_row_for_it_says(tmp_path: Path, kind: str) -> None:
    facts = {f.name: f for f in measure(kind, tmp_path)}
    row = BEHAVIOURS[kind]
    want = facts_of(row)
    assert {k: facts[k].value for k in want} == want, \
        {k: (f.value, f.detail) for k, f in facts.items()}
    if row.v5 is not None and row.v5.will_delay:   # 2 s, and late by up to 2 s under load
        delay = facts["will_delay"].value
        assert delay.endswith("; none if back in time"), facts["will_delay"]
        seconds = float(delay.removeprefix("will after ").split(" s;")[0])
        assert 2.0 <= seconds <= 4.0, facts["will_delay"]
    window = row.keepalive_close_ms(KEEPALIVE_S)
    if window is not None:
        # a silent client is dropped and its will published: 1.5 x keepalive (3 s) at the
        # earliest by the standard; Mosquitto 2.0 in whole seconds by a sweep every 6 s
        # (4-10 s at 2 s), as the row says. Late by up to 2 s on a loaded machine.
        low, high = window
        for name in ("keepalive", "keepalive_receiving"):
            seconds = float(facts[name].value.removeprefix("will after ").removesuffix(" s"))
            assert low / 1000 - 0.5 <= seconds <= high / 1000 + 2.0, facts[name]


@pytest.fixture
def external_mosquitto(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A Mosquitto the bench did not start: a password, no anonymous clients, a pid file
    and a restart script, as on a user's machine."""
    if MOSQUITTO is None and not os.environ.get("CI"):
        pytest.skip("mosquitto not installed (apt-get install mosquitto; .ci/run does)")
    port = free_port()
    data, conf, pid = tmp_path / "data", tmp_path / "m.conf", tmp_path / "m.pid"
    data.mkdir()
    subprocess.run(["mosquitto_passwd", "-c", "-b", str(tmp_path / "pw"), "probe", "s3cret-pw"],
                   check=True)
    conf.write_text("\n".join([
        f"listener {port} 127.0.0.1", "allow_anonymous false",
        f"password_file {tmp_path / 'pw'}", "persistence true",
        f"persistence_location {data}/", f"pid_file {pid}",
        f"user {pwd.getpwuid(os.geteuid()).pw_name}", ""]))
    start = f"{MOSQUITTO or 'mosquitto'} -c {conf} -d"
    restart = tmp_path / "restart.sh"
    restart.write_text(f"#!/bin/sh\np=$(cat {pid}); kill $p; "
                       f"while kill -0 $p 2>/dev/null; do sleep 0.05; done; {start}\n")
    restart.chmod(0o755)
    subprocess.run(start, shell=True, check=True)
    wait_listening("127.0.0.1", port, 10, None, None)
    yield port, str(restart)
    with open(pid) as fh:   # the restart may have replaced the process: read it now
        os.kill(int(fh.read()), signal.SIGTERM)
    time.sleep(0.2)


def test_brokers_measures_an_external_broker_with_credentials_and_a_restart_command(
        external_mosquitto, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    port, restart = external_mosquitto
    url = f"mqtt://probe:s3cret-pw@127.0.0.1:{port}"
    # exit 1: Mosquitto 2.0.11 serves no shared subscription on $a2a/..., a MUST of the
    # profile's (docs/findings/brokers.md)
    assert main(["brokers", "--broker", url, "--broker-restart-command", restart,
                 "--json"]) == EXIT_FALSE
    out, err = capsys.readouterr()
    assert "s3cret-pw" not in out + err
    judged = json.loads(out)[f"127.0.0.1:{port}"]
    facts = {f["name"]: f["value"] for f in judged}
    assert facts["redelivery"] == "resent, DUP=1"
    assert facts["persistence"] == "session and queued message kept"
    # and, reached by URL, it is held to 1.5 x keepalive: the bench cannot know whose
    # documented sweep to allow (started by name, Mosquitto's 5 s sweep is allowed)
    assert [f["name"] for f in judged if f["verdict"] == "false"] == [
        "keepalive", "keepalive_receiving", "profile_paths"]


def test_brokers_without_a_restart_command_says_persistence_was_not_measured(
        external_mosquitto, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    port, _restart = external_mosquitto
    assert main(["brokers", "--broker", f"mqtt://probe:s3cret-pw@127.0.0.1:{port}",
                 "--json"]) == EXIT_FALSE
    facts = {f["name"]: f for f in json.loads(capsys.readouterr().out)[f"127.0.0.1:{port}"]}
    assert facts["persistence"]["value"] == "not measured"
    assert "--broker-restart-command" in facts["persistence"]["detail"]


@pytest.mark.parametrize("url", ["mqtts://:8883", "http://host", "mqtt://host:99999"])
def test_brokers_refuses_a_url_it_cannot_use_in_one_line(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["brokers", "--broker", url]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--broker=" in err[0], err


def test_a_run_on_an_external_broker_with_credentials_logs_every_client_in(
        external_mosquitto, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """Nodes (in their own processes too) and the nemesis log in with the URL's user; the
    password reaches them over stdin and appears in nothing the run writes or prints."""
    port, _restart = external_mosquitto
    out = tmp_path / "run"
    code = main(["run", "crash_in_flight", "--broker", f"mqtt://probe:s3cret-pw@127.0.0.1:{port}",
                 "--nodes", "process", "--no-plots", "--out", str(out)])
    printed = "".join(capsys.readouterr())
    assert code == EXIT_OK, printed[-2000:]
    assert "s3cret-pw" not in printed
    for path in out.rglob("*"):
        if path.is_file():
            assert b"s3cret-pw" not in path.read_bytes(), path


def _events(run: Path, kind: str) -> list[dict]:  # type: ignore[type-arg]
    return [e for e in map(json.loads, (run / "history.jsonl").read_text().splitlines())
            if e["kind"] == kind]


def test_broker_restart_on_an_external_broker_runs_the_command_stamped_when_it_takes_effect(
        external_mosquitto, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    port, restart = external_mosquitto
    out = tmp_path / "run"
    code = main(["run", "broker_restart", "--broker", f"mqtt://probe:s3cret-pw@127.0.0.1:{port}",
                 "--broker-restart-command", restart, "--no-plots", "--out", str(out)])
    assert code == EXIT_OK
    down, up = _events(out, "broker_down"), _events(out, "broker_up")
    stopped = [f for f in _events(out, "fault_fired") if f["action"] == "broker stopped"]
    assert len(down) == len(up) == len(stopped) == 1 and down[0]["planned"]
    # stamped when the watch saw the broker go, not when the command returned (a second later)
    assert abs(stopped[0]["tMs"] - down[0]["tMs"]) < 500, (stopped, down)
    assert up[0]["tMs"] - down[0]["tMs"] >= 1000    # the script waits a second before starting


def test_broker_restart_on_an_external_broker_without_a_command_exits_3_saying_why(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "broker_restart", "--broker", "mqtt://127.0.0.1:1"]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "faults[0] broker_restart needs --broker-restart-command" in err[0]


def test_a_broker_that_dies_mid_run_is_named_in_the_verdicts_not_blamed_on_a_node(
        external_mosquitto, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import threading
    port, _restart = external_mosquitto
    pid = int((tmp_path / "m.pid").read_text())
    threading.Timer(4.0, os.kill, (pid, signal.SIGKILL)).start()
    out = tmp_path / "run"
    code = main(["run", "quickstart", "--broker", f"mqtt://probe:s3cret-pw@127.0.0.1:{port}",
                 "--no-plots", "--out", str(out)])
    subprocess.run(f"{MOSQUITTO or 'mosquitto'} -c {tmp_path / 'm.conf'} -d", shell=True,
                   check=True)   # for the fixture's teardown, which kills the pid file's pid:
    # waits for the daemon to listen and to write its own pid there (a teardown that read the
    # killed broker's pid raised ProcessLookupError once, on a loaded machine)
    wait_listening("127.0.0.1", port, 10, None, None)
    deadline = time.monotonic() + 10
    while (tmp_path / "m.pid").read_text().strip() == str(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    verdicts = json.loads((out / "verdicts.json").read_text())
    verdicts = verdicts["verdicts"] if isinstance(verdicts, dict) else verdicts
    # (what was FALSE, with its first cases: once, under a full suite beside a fast-lane
    # loop, something was, and pytest's cut of the whole list hid what)
    assert code == 2 and not [v for v in verdicts if v["value"] == "false"], \
        (code, [(v["name"], v["counterexamples"][:2]) for v in verdicts if v["value"] == "false"])
    down = _events(out, "broker_down")
    assert len(down) == 1 and not down[0]["planned"]
    # nothing vouched for after the broker was gone: no TRUE, and the outage is named
    assert not [v["name"] for v in verdicts if v["value"] == "true"]
    assert sum("the broker went down" in v["note"] for v in verdicts) >= 10, verdicts


def test_runs_on_a_long_lived_broker_never_see_each_other(
        external_mosquitto, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """On an external broker each run carries its run id in every client id and in the
    topic prefix, and clears its sessions and retained announcements at the end; with
    --no-isolation the next run finds the last one's sessions (what isolation prevents)."""
    import asyncio

    from bench.run import run_scenario
    from bench.substrates import Options
    from bench.substrates.live.facts import RawClient
    from bench.variants import REFERENCE
    from tests.live.conftest import compressed
    port, _restart = external_mosquitto
    url = f"mqtt://probe:s3cret-pw@127.0.0.1:{port}"

    def run(name: str, isolate: bool = True) -> Path:
        result = run_scenario(compressed("quickstart", 3), REFERENCE, tmp_path / name,
                              mode="live", options=Options(broker=url, isolate=isolate))
        assert result.exit_code == EXIT_OK, result.verdicts
        return tmp_path / name

    async def left_behind(client_ids: set[str]) -> tuple[list[str], list[str]]:
        watcher = await RawClient.connect("127.0.0.1", port, "left-behind", username="probe",
                                          password="s3cret-pw")
        await watcher.subscribe("ooder/#")
        retained = [p.topic for p in await watcher.publishes(1.0) if p.retain and p.payload]
        await watcher.disconnect()
        sessions = []
        for cid in sorted(client_ids):
            c = await RawClient.connect("127.0.0.1", port, cid, clean=False, username="probe",
                                        password="s3cret-pw")
            if c.session_present:
                sessions.append(cid)
            await c.disconnect()
        return retained, sessions

    isolated = run("isolated")
    (started,) = _events(isolated, "run_started")
    connected = _events(isolated, "mqtt_connected")
    assert connected and all(c["clientId"].endswith(f"-{started['runId']}") for c in connected)
    assert asyncio.run(left_behind({c["clientId"] for c in connected})) == ([], [])

    shared = [run(f"shared-{k}", isolate=False) for k in (1, 2)]
    (started,) = _events(shared[1], "run_started")
    assert "runId" not in started
    again = {c["node"]: c["sessionPresent"] for c in _events(shared[1], "mqtt_connected")}
    assert all(again.values()), again   # the last run's sessions, found by the next


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA of its own and a server certificate it signed for 127.0.0.1: (ca, cert, key)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str,
             signer: ec.EllipticCurvePrivateKey, ca: bool) -> x509.Certificate:
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
             .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            b = b.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        return b.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(cert("a2a-bench test CA", ca_key, "a2a-bench test CA", ca_key, True)
                         .public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert("127.0.0.1", key, "a2a-bench test CA", ca_key, False)
                         .public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


@pytest.fixture
def tls_mosquitto(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A Mosquitto that speaks only TLS, with a certificate from a CA of the test's own."""
    if MOSQUITTO is None and not os.environ.get("CI"):
        pytest.skip("mosquitto not installed (apt-get install mosquitto; .ci/run does)")
    ca, cert, key = _certificates(tmp_path)
    port = free_port()
    conf = tmp_path / "tls.conf"
    conf.write_text("\n".join([
        f"listener {port} 127.0.0.1", "allow_anonymous true",
        f"cafile {ca}", f"certfile {cert}", f"keyfile {key}", "persistence false",
        f"user {pwd.getpwuid(os.geteuid()).pw_name}", ""]))
    proc = subprocess.Popen([MOSQUITTO or "mosquitto", "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening("127.0.0.1", port, 10, None, None)
    yield port, ca
    proc.terminate()
    proc.wait(timeout=10)


def test_a_broker_over_tls_is_run_against_with_its_ca(
        tls_mosquitto, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """mqtts:// with --broker-ca: the nodes in their own processes, the bench's watch and
    clean-up clients, and the fault proxy (plain to the node, TLS to the broker) all speak
    TLS. (`brokers` reaches it with the same client as the clean-up.)"""
    from bench.run import run_scenario
    from bench.substrates import Hosting, Options
    from bench.variants import REFERENCE
    from tests.live.conftest import compressed
    port, ca = tls_mosquitto
    url = f"mqtts://127.0.0.1:{port}"
    out = tmp_path / "run"
    result = run_scenario(compressed("crash_in_flight", 4), REFERENCE, out, mode="live",
                          options=Options(broker=url, broker_ca=str(ca),
                                          hosting=Hosting.PROCESS))
    assert result.exit_code == EXIT_OK, result.verdicts
    (started,) = _events(out, "run_started")
    assert started["brokerUrl"] == url
    result = run_scenario(compressed("latency", 6), REFERENCE, tmp_path / "proxied", mode="live",
                          options=Options(broker=url, broker_ca=str(ca), link_faults=True))
    assert _events(tmp_path / "proxied", "fault_proxy")
    assert {v.name: v.value.value for v in result.verdicts}["silent_loss"] == "true"


def test_a_wrong_password_is_one_line_naming_the_brokers_answer(
        external_mosquitto, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    port, _restart = external_mosquitto
    assert main(["run", "quickstart", "--broker",
                 f"mqtt://probe:wrong@127.0.0.1:{port}"]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert "refused the bench's connection: CONNACK return code" in err[-1], err
    assert "wrong" not in "".join(err)


def test_a_broker_over_tls_whose_certificate_nothing_vouches_for_is_not_reached(
        tls_mosquitto, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    port, _ca = tls_mosquitto
    for command in (["brokers"], ["run", "quickstart"]):
        assert main([*command, "--broker", f"mqtts://127.0.0.1:{port}"]) == EXIT_INVALID
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "CERTIFICATE_VERIFY_FAILED" in err[0], err


@pytest.mark.parametrize(("args", "says"), [
    (["--broker", "mqtt://127.0.0.1:1", "--broker-ca", "ca.pem"], "--broker-ca=ca.pem"),
    (["--broker", "mqtts://127.0.0.1:1", "--broker-ca", "/nonexistent.pem"],
     "--broker-ca=/nonexistent.pem: not a readable PEM CA file")])
def test_a_ca_file_it_cannot_use_is_refused_in_one_line(
        args: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["brokers", *args], ["run", "quickstart", *args]):
        assert main(command) == EXIT_INVALID
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err


def test_mosquitto_gives_a_silent_client_up_in_the_second_the_simulator_predicts(
        tmp_path: Path) -> None:
    """The sweep's phase, not a 6 s window: started on a whole second, Mosquitto sweeps in
    phase with the simulated broker, counted from a run started `in_phase`, so
    `close_at_ms` names the sweep that closes each silent client. Clients fall silent 0.3,
    1.3 and 2.4 s into the run at keepalive 2 s (closed once more than 3 whole seconds
    passed; sweeps at 5, 11, 17 s): the first two at the sweep at 5 s — the second only
    because the broker keeps whole seconds (1.3 + 4 is after it) — the third at 11 s. Waits
    for the phase and those closes, 12 s at most, and allows each 0.6 s late on a loaded
    machine."""
    if MOSQUITTO is None and not os.environ.get("CI"):
        pytest.skip("mosquitto not installed (apt-get install mosquitto; .ci/run does)")
    import asyncio

    from bench.spec.brokers import RUN_AFTER_BROKER_MS
    from bench.substrates.live.brokers import make_broker
    from bench.substrates.live.facts import RawClient

    # started on a whole second: a loaded machine may take the start past the next one
    # (CI, 2026-12-06, beside a 100,000-node judge), and then it is started again, twice
    for attempt in range(3):
        broker = make_broker("mosquitto", tmp_path / f"start-{attempt}")
        broker.start(on_second=True)
        if broker.start_second is not None:
            break
        broker.stop()
    try:
        assert broker.start_second is not None, "three starts straddled a second (loaded?)"
        origin = broker.in_phase()
        assert origin is not None
        check = BEHAVIOURS["mosquitto"].keepalive_close
        assert check is not None

        async def silent(after_s: float) -> tuple[float, float]:
            await asyncio.sleep(max(0.0, origin + after_s - time.monotonic()))
            client = await RawClient.connect(broker.host, broker.port, f"silent-{after_s}",
                                             keepalive_s=2)
            last = time.monotonic() - origin
            assert await client.closed_within(20.0)
            return last, time.monotonic() - origin

        async def all_of() -> list[tuple[float, float]]:
            return await asyncio.gather(*(silent(s) for s in (0.3, 1.3, 2.4)))
        for last, closed in asyncio.run(all_of()):
            want = check.close_at_ms(last * 1000, 2, check.started_ms(-RUN_AFTER_BROKER_MS))
            assert want / 1000 <= closed + 0.05 <= want / 1000 + 0.65, (last, closed, want)
    finally:
        broker.stop()


@pytest.mark.parametrize("kind", brokers())
def test_amqtt_hands_a_named_client_retained_messages_it_never_subscribed(
        tmp_path: Path, kind: str) -> None:
    """A finding of amqtt 0.12 (raw paho clients, no bench code in the path): a client with
    a username and clean_session=0 that connects while retained cards sit on the broker, on
    topics other clients' subscriptions match (the nodes' `ooder/directory/+`), is sent
    them at once, retained, though it sent no SUBSCRIBE at all (without those other
    subscriptions it is sent nothing). [MQTT-3.3.1-6]: retained messages go to a new
    subscription whose filter matches them, and only there. Found when qos1_redelivery's capture client (subscribed to
    every inbox) re-sent directory cards (explore, 2026-12-04). Mosquitto sends nothing.
    Expected on amqtt 0.12, so a release that fixes it fails here and is noticed. Waits
    1.5 s for deliveries that should not come."""
    import paho.mqtt.client as mqtt

    from bench.substrates.live.brokers import make_broker

    broker = make_broker(kind, tmp_path)
    broker.start()
    clients: list[mqtt.Client] = []
    try:
        def client(name: str) -> mqtt.Client:
            c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name,
                            clean_session=False)
            c.username_pw_set(name)
            c.connect(broker.host, broker.port)
            c.loop_start()
            clients.append(c)
            return c
        for n in ("exec-1", "exec-2", "orch-1"):   # as nodes do: read the directory, announce
            c = client(n)
            c.subscribe([("ooder/directory/+", 1), (f"ooder/node/{n}/inbox", 1)])
            time.sleep(0.2)
            c.publish(f"ooder/directory/{n}", f"card of {n}".encode(), qos=1,
                      retain=True).wait_for_publish(5)
        got: list[str] = []
        late = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="observer",
                           clean_session=False)
        late.username_pw_set("observer")
        late.on_message = lambda _c, _u, m: got.append(m.topic)
        late.connect(broker.host, broker.port)
        late.loop_start()
        clients.append(late)
        time.sleep(1.5)
        if kind == "amqtt":
            assert got, "amqtt 0.12 sent no stray retained message: fixed? update the finding"
            assert all(t.startswith("ooder/directory/") for t in got), got
        else:
            assert got == []
    finally:
        for c in clients:
            c.loop_stop()
            c.disconnect()
        broker.stop()


@pytest.mark.parametrize("kind", brokers())
def test_a_broker_whose_port_was_taken_since_it_was_chosen_starts_on_another(
        tmp_path: Path, kind: str) -> None:
    """Two runs side by side chose one free port (issue 50, point 3: "broker exited with 1
    before listening … Address already in use"): the first start takes another; a restart
    keeps the port its clients know."""
    import socket

    from bench.substrates.live.brokers import BrokerError, make_broker
    broker = make_broker(kind, tmp_path)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", broker.port))
        squatter.listen()
        taken = broker.port
        broker.start()
        try:
            assert broker.port != taken
            moved = broker.port
            first = broker.proc.pid if broker.proc is not None else None
            broker.stop()
            broker.port = taken          # a restart on a port taken meanwhile: said, not moved
            with pytest.raises(BrokerError, match="(?i)address already in use"):
                broker.start()
            assert broker.port == taken
            broker.port = moved
            try:
                broker.start()           # and on its own port it comes back
            except BrokerError as exc:
                # unless, on a machine this busy, another process took that port too in the
                # moment it was free (CI, 2026-12-06, ten workers): then said, not moved —
                # and the port must really be held (bound by someone, not our own leftover)
                assert "already in use" in str(exc).lower(), exc
                assert broker.port == moved
                with socket.socket() as probe:
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    with pytest.raises(OSError):
                        probe.bind(("127.0.0.1", moved))
                held = subprocess.run(["ss", "-Htanp", f"sport = :{moved}"],
                                      capture_output=True, text=True).stdout
                assert f"pid={first}," not in held, held   # not the stopped broker's
        finally:
            broker.stop()


def test_whether_a_process_listens_holds_while_it_opens_and_closes_files() -> None:
    """CI, 2026-12-05: an fd listed a moment before was gone when read (a broker importing
    its modules), taken for "cannot tell", and an amqtt that had failed to bind was believed
    to listen on the port the squatter held."""
    import socket
    import subprocess
    import sys

    from bench.substrates.live.brokers import _listens
    churn = subprocess.Popen([sys.executable, "-c", (
        "import os\n"
        "while True:\n"
        "    fds = [os.open('/dev/null', os.O_RDONLY) for _ in range(50)]\n"
        "    for fd in fds: os.close(fd)\n")])
    try:
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", 0))
            squatter.listen()
            port = squatter.getsockname()[1]
            seen = {_listens(churn.pid, port) for _ in range(300)}
        assert seen == {False}
    finally:
        churn.kill()
        churn.wait()
    assert _listens(churn.pid, port) is False      # gone: not ours, whoever listens


@pytest.mark.parametrize("kind", brokers())
def test_a_client_connecting_while_another_subscribes_has_its_subscribe_answered(
        tmp_path: Path, kind: str) -> None:
    """A finding of amqtt 0.12.1, seen with paho clients only (the `subscribe_while_connecting`
    fact measures it with the bench's raw clients): 300 retained messages on a filter one
    client holds, three others each subscribing to a new filter every 2 ms, and up to twenty
    clients connecting meanwhile, each subscribing as it connects. [MQTT-3.8.4-1]: each SUBSCRIBE
    MUST get its SUBACK; on amqtt some never do (docs/findings/brokers-amqtt-mosquitto.md).
    Waits up to 3 s for a SUBACK, once on amqtt; Mosquitto answers within milliseconds."""
    import threading

    import paho.mqtt.client as mqtt

    from bench.substrates.live.brokers import make_broker

    broker = make_broker(kind, tmp_path)
    broker.start()
    clients: list[mqtt.Client] = []

    def client(name: str) -> mqtt.Client:
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name)
        c.username_pw_set(name)
        clients.append(c)
        return c
    stop = threading.Event()
    try:
        pub = client("pub")
        pub.connect(broker.host, broker.port)
        pub.loop_start()
        for i in range(300):
            pub.publish(f"t/{i}", b"x" * 100, qos=1, retain=True).wait_for_publish(5)
        holder = client("holder")
        holder.connect(broker.host, broker.port)
        holder.loop_start()
        holder.subscribe("t/#", 1)
        def new_filters(churn: mqtt.Client, name: str) -> None:
            n = 0
            while not stop.wait(0.002):
                churn.subscribe(f"{name}/{n}", 1)
                n += 1
        # three of them: on a loaded machine (a full suite on 10 workers beside a fast-lane
        # loop) one churning client and ten newcomers all got their SUBACK
        for i in range(3):
            churn = client(f"churn-{i}")
            churn.connect(broker.host, broker.port)
            churn.loop_start()
            threading.Thread(target=new_filters, args=(churn, f"churn-{i}"),
                             daemon=True).start()
        unanswered = 0
        for k in range(20):       # on amqtt, until one goes unanswered (most do)
            acked = threading.Event()
            late = client(f"late-{k}")
            late.on_connect = lambda c, _u, _f, _rc, _p: c.subscribe("a/x", 1)
            late.on_subscribe = lambda *_a, acked=acked: acked.set()
            late.connect(broker.host, broker.port)
            late.loop_start()
            if not acked.wait(3.0):
                unanswered += 1
                break
    finally:
        stop.set()
        for c in clients:
            c.loop_stop()
            c.disconnect()
        broker.stop()
    if BEHAVIOURS[kind].subscribe_races_connect:
        assert unanswered, "amqtt answered every SUBSCRIBE: fixed? update the finding and its row"
        assert "dictionary changed size during iteration" in (tmp_path / "amqtt.log").read_text()
    else:
        assert not unanswered
