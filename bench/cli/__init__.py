"""The `a2a-bench` command: one module per group of subcommands, each holding its
parsers and their bodies (`bench.cli.run`, `bench.cli.matrix`, ...); this one assembles
the parser and dispatches.

Exit codes (STYLE): 0 every verdict true, 1 some verdict false, 2 unknown or harness
error, 3 invalid input (bad arguments or files).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from typing import Any

from bench import __version__
from bench.cli import brokers, catalogue, conform, exchange, explore, load, matrix, run, stored
from bench.cli.common import EXIT_FALSE, EXIT_INVALID, EXIT_OK, EXIT_UNKNOWN

__all__ = ["EPILOG", "EXIT_FALSE", "EXIT_INVALID", "EXIT_OK", "EXIT_UNKNOWN", "build_parser",
           "main"]

DESCRIPTION = """\
a2a-bench: find the failures of agent-to-agent systems over MQTT that only appear across
processes — a task executed twice after a QoS1 redelivery, a mute receiver with an empty
directory, a response that cannot find its way back, a "strict" mode that trusts claims.
"""

EPILOG = """\
examples:
  a2a-bench run scenarios/quickstart.toml             live on the embedded broker, check, report
  a2a-bench run quickstart --mode sim                 the same in simulation (virtual time, seeded)
  a2a-bench run restart --nodes process --broker mosquitto
                                                      one OS process per node, SIGKILL restarts
  a2a-bench run qos1_redelivery --variant memory_dedup_60s
                                                      the same scenario against a seeded defect
  a2a-bench run restart --mode sim --seed 7           replay any run with its printed seed
  a2a-bench run partition --mode sim --broker mosquitto
                                                      simulate what Mosquitto would do
  a2a-bench run quickstart --topology split           the same scenario on another topology
  a2a-bench check results/<run-id>                    judge a stored history again
  a2a-bench compare results/A results/B               runs side by side (sim vs live, amqtt vs mosquitto)
  a2a-bench list                                      scenarios, topologies, faults, checkers, variants
  a2a-bench matrix scenarios/default.matrix.toml -j 2
                                                      every fault and every seeded defect, 2 at a time
  a2a-bench matrix scenarios/default.matrix.toml -k gate --lf
                                                      only the gate cells / only what failed last time
  a2a-bench report results/<run-id>                   plots and a self-contained report.html
  a2a-bench explore --variant memory_dedup_60s --minutes 5 -j 2
                                                      random scenarios until one fails, then shrink it
  a2a-bench brokers --broker mqtt://user:pw@host      what a broker does where MQTT leaves room
  a2a-bench run quickstart --node-command executor=./my-node
                                                      your own node as every executor (docs/PROTOCOL.md)
  a2a-bench conform ./my-node                         your node against every protocol rule: PASS/FAIL/UNKNOWN
  a2a-bench load quickstart --broker mosquitto        rising load in steps until the knee

exit codes: 0 every verdict as expected (true unless the scenario, or no wire tap, says otherwise),
1 some verdict false, 2 some verdict unknown or a harness error, 3 invalid input files or arguments
"""


class _Help(argparse.HelpFormatter):
    """A description or epilog paragraph (between blank lines) written as one line is
    wrapped; one written with line breaks of its own (columns, examples) is printed as
    written. An option's help is wrapped at spaces only: an example in it (a path, an ssh
    gateway) is never cut in the middle."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for para in text.split("\n\n"):
            if "\n" in para.strip("\n"):
                out.append("".join(indent + line for line in para.splitlines(keepends=True)))
            else:
                out.append(textwrap.fill(" ".join(para.split()), width, initial_indent=indent,
                                         subsequent_indent=indent, break_long_words=False,
                                         break_on_hyphens=False))
        return "\n\n".join(out)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_long_words=False,
                             break_on_hyphens=False)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["formatter_class"] = _Help   # every command's help is formatted alike
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_INVALID, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="a2a-bench", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"a2a-bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run.add_run(sub)
    run.add_check(sub)
    stored.add_compare(sub)
    brokers.add_deploy(sub)
    catalogue.add_list(sub)
    stored.add_runs(sub)
    catalogue.add_describe(sub)
    catalogue.add_validate(sub)
    matrix.add_matrix(sub)
    load.add_load(sub)
    stored.add_report(sub)
    explore.add_explore(sub)
    brokers.add_brokers(sub)
    conform.add_conform(sub)
    conform.add_grid(sub)
    exchange.add_exchange(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _dispatch(argv)
    except BrokenPipeError:
        # whoever read the output went away (`a2a-bench list | head -1`): not a failure;
        # stdout goes nowhere from now on, so the interpreter's last flush is quiet too
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        # a Ctrl-C before a run took charge of it (loading files, importing the substrate):
        # nothing was started, so nothing is left to stop or judge
        print("a2a-bench: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_UNKNOWN


def _dispatch(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_INVALID
    code: int = args.handler(args)
    return code
