"""`brokers`: what a broker does where MQTT leaves room; `deploy`: a topology as a Compose file."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cli.common import (
    EXIT_FALSE,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNKNOWN,
    Sub,
)

if TYPE_CHECKING:
    pass


def add_deploy(sub: Sub) -> None:
    dp = sub.add_parser(
        "deploy", help="write a topology's docker deployment as a Compose file",
        description="Write TOPOLOGY's deployment — the broker and one container per node, the "
                    "same image and node process as --mode docker — as a Compose file, with "
                    "each node's launch spec and data dir beside it. Bring it up with "
                    "`docker-compose -f FILE up -d` (or `docker compose`), look at it, point "
                    "`a2a-bench run SCENARIO --broker mqtt://127.0.0.1:1883` at its broker, "
                    "and take it down with `docker-compose -f FILE down`.",
        epilog="example:\n  a2a-bench deploy star --broker mosquitto --compose deploy/star.yml")
    dp.add_argument("topology", help="topology file or name (see `a2a-bench list`)")
    dp.add_argument("--broker", choices=["amqtt", "mosquitto"],
                    help="the broker the Compose file runs (default: what a run of the "
                         "topology starts: amqtt, or mosquitto where it speaks MQTT 5)")
    dp.add_argument("--compose", metavar="FILE", required=True, type=Path,
                    help="the Compose file to write (specs/ and data/ go beside it)")
    dp.add_argument("--port", type=int, default=1883,
                    help="the broker's port published on 127.0.0.1 (default 1883)")
    dp.set_defaults(handler=_deploy)


def add_brokers(sub: Sub) -> None:
    bk = sub.add_parser(
        "brokers", help="judge a broker by its MQTT MUSTs, and measure where MQTT leaves room",
        description="Measure, with the bench's own raw MQTT clients, what each broker does\n"
                    "where MQTT 3.1.1 leaves room or brokers stray: whether an unacknowledged\n"
                    "QoS1 message is resent on resume and with DUP=1; how long a silent client\n"
                    "(keepalive 2 s) lives before its will is published, with nothing to send\n"
                    "it and while it is sent messages; which will a session takeover publishes;\n"
                    "how many copies one client with overlapping filters gets; whether RETAIN is\n"
                    "set as 3.1.1 says; whether a client that connects while another subscribes\n"
                    "has its own SUBSCRIBE answered; what a graceful restart keeps. Then, on a\n"
                    "broker that speaks MQTT 5: session and message expiry, will delay, User\n"
                    "Properties, Response Topic and Correlation Data, PUBACK reason codes,\n"
                    "Receive Maximum, shared subscriptions ($share/…: the split, a dropped\n"
                    "member's in-flight, $ topics) and retained properties. Topics and client\n"
                    "ids carry a fresh nonce, so a shared broker is safe. About 25 s per broker.\n\n"
                    "Each fact a normative statement decides is a verdict naming it: TRUE,\n"
                    "FALSE or UNKNOWN, at MUST, SHOULD or PROFILE (what the A2A-over-MQTT\n"
                    "profile needs of a broker, on its $a2a/... topics); what MQTT leaves to\n"
                    "the broker is printed as measured.\n\n"
                    "exit codes: 0 no MUST broken, 1 a MUST broken, 2 a broker the bench starts\n"
                    "could not be started, 3 invalid arguments (a broker not installed, a URL\n"
                    "that names no reachable broker, a refused login or an unverifiable\n"
                    "certificate included)",
        epilog="examples:\n  a2a-bench brokers                      amqtt and Mosquitto, started here\n"
               "  a2a-bench brokers --broker mqtt://user:secret@10.0.0.5 --broker-restart-command "
               "'systemctl restart mosquitto'\n"
               "  a2a-bench brokers --broker mqtts://broker.example:8883 --broker-ca ca.pem")
    bk.add_argument("--broker", action="append", metavar="BROKER",
                    help="a broker the bench starts (amqtt, mosquitto, moat-lib-mqtt, iotcore, "
                         "rumqttd, rmqttd, rabbitmq, ejabberd: docs/brokers/), "
                         "mqtt://[user:password@]host[:port] or mqtts://… (repeatable; "
                         "default: amqtt, and mosquitto when installed)")
    bk.add_argument("--broker-ca", metavar="FILE",
                    help="the CA certificate (PEM) that verifies the mqtts:// brokers "
                         "(default: the system's CAs)")
    bk.add_argument("--broker-restart-command", metavar="CMD",
                    help="an external broker: a shell command that restarts it gracefully "
                         "(without it, persistence is not measured)")
    bk.add_argument("--json", action="store_true", help="print the facts as JSON")
    bk.set_defaults(handler=_brokers)


def _deploy(args: argparse.Namespace) -> int:
    from bench.spec.distribution import SpecError
    from bench.substrates.docker.compose import compose
    from bench.substrates.docker.image import tag
    try:
        doc = compose(args.topology, args.broker, args.compose, args.port)
    except SpecError as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:
        print(f"a2a-bench: --compose={args.compose}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    print(f"wrote {args.compose}: {len(doc['services']) - 1} nodes and the {doc['broker']} "
          f"broker on 127.0.0.1:{args.port}, image {tag()} (build it with "
          "`python -m bench.substrates.docker.image` if it is not there)\n"
          f"  up:   docker-compose -f {args.compose} up -d\n"
          f"  run:  a2a-bench run SCENARIO --broker mqtt://127.0.0.1:{args.port}   (a scenario "
          f"of {args.topology}'s protocol)\n"
          f"  down: docker-compose -f {args.compose} down")
    return EXIT_OK


def _brokers(args: argparse.Namespace) -> int:
    import tempfile

    from bench.substrates.live import broker_refusal
    from bench.substrates.live.brokers import BrokerError
    from bench.substrates.live.facts import measure, render, verdict_lines

    specs = args.broker or ["amqtt", *(["mosquitto"] if shutil.which("mosquitto")
                                       or Path("/usr/sbin/mosquitto").exists() else [])]
    if args.broker_ca and not any(s.startswith("mqtts://") for s in specs):
        print(f"a2a-bench: --broker-ca={args.broker_ca}: no mqtts:// --broker to verify with it",
              file=sys.stderr)
        return EXIT_INVALID

    if args.broker_restart_command and all("://" not in s for s in specs):
        # the brokers the bench starts it restarts itself: the command would never run
        print(f"a2a-bench: --broker-restart-command: for a broker by URL (mqtt://…); the bench "
              f"starts {', '.join(specs)} itself and restarts {'it' if len(specs) == 1 else 'them'} "
              "itself", file=sys.stderr)
        return EXIT_INVALID

    def ca(spec: str) -> str | None:
        return args.broker_ca if spec.startswith("mqtts://") else None
    for spec in specs:   # every argument checked before anything is measured
        if (refusal := broker_refusal(spec, ca(spec))) is not None:
            print(f"a2a-bench: {refusal}", file=sys.stderr)
            return EXIT_INVALID
    facts = {}
    for spec in specs:
        name = spec.split("@")[-1] if "://" in spec else spec   # never print a password
        name = name.split("://")[-1]
        if not args.json:
            print(f"a2a-bench brokers: measuring {name}", file=sys.stderr)
        try:
            with tempfile.TemporaryDirectory(prefix="a2a-brokers-") as tmp:
                facts[name] = measure(spec, Path(tmp), args.broker_restart_command,
                                      say=(lambda line: None) if args.json else
                                      (lambda line: print("  " + line, file=sys.stderr)),
                                      ca_file=ca(spec))
        except (BrokerError, OSError) as exc:
            print(f"a2a-bench: {name}: {exc}", file=sys.stderr)
            return EXIT_UNKNOWN
    broken = {b: [f.name for f in fs if f.broken] for b, fs in facts.items()}
    if args.json:
        print(json.dumps({b: [{"name": f.name, "value": f.value, "detail": f.detail,
                               "clause": f.clause, "level": f.level or None,
                               "verdict": f.verdict} for f in fs]
                          for b, fs in facts.items()}, indent=2))
    else:
        for b, fs in facts.items():
            print("\n".join(verdict_lines(b, fs)) + "\n")
        print(render(facts))
        for b, names in broken.items():
            if names:
                print(f"\n{b}: {len(names)} MUST broken ({', '.join(names)})")
    return EXIT_FALSE if any(broken.values()) else EXIT_OK
