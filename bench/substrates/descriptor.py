"""What a substrate says about itself, so that the layers above it — the CLI, the matrix,
the run, the reports — ask instead of comparing a mode: the choices it accepts and the one
line it refuses the others with, the brokers and node hostings it runs, how it names
itself in the run header, `summary.json` and the replay command, and how it opens its
deployment.

Each substrate package exports one `Substrate` (`bench.substrates.sim.SUBSTRATE`, ...);
`bench.substrates.substrate(mode)` finds it. Nothing here starts anything: describing a
substrate imports none of simpy, asyncio brokers or the Docker SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bench.spec.scenario import Mode, Scenario

if TYPE_CHECKING:
    from bench.history import Recorder
    from bench.substrates import Deployment, Options
    from bench.variants import Variant


@dataclass(frozen=True, slots=True)
class Choice:
    """What a user chose for a run beyond the scenario — the CLI's flags, a matrix cell's
    broker and nodes — before a substrate reads it. None: not given."""

    broker: str | None = None
    nodes: str | None = None
    broker_ca: str | None = None
    restart_command: str | None = None
    no_isolation: bool = False
    keep: bool = False
    swarm: bool = False
    wire_tap: bool = False
    node_commands: tuple[str, ...] = ()
    #: --node-image ROLE=IMAGE as given (for the replay)
    node_images: tuple[str, ...] = ()
    #: --hosts FILE: the inventory of a --mode hosts run
    hosts: str | None = None


@dataclass(frozen=True, slots=True)
class Identity:
    """How a run on a substrate names where it ran (`summary.json`, `scenario.json`, the
    run list): the broker, how its nodes were hosted, the broker model (sim only)."""

    broker: str
    nodes: str
    model: str | None = None


class Substrate(Protocol):
    """One substrate, described. Methods take the scenario and the run's `Options` (or the
    user's `Choice` before there are options) and never start anything, except `open`."""

    mode: Mode
    #: real brokers and nodes in wall-clock time (the run clock is a wall clock)
    wall_clock: bool
    #: how a progress line names the run's clock ("simulated", "run")
    clock_word: str
    #: how late a node's timer may fire here (a busy host, an event loop's turn): what the
    #: rules that judge a deadline allow, read from the run's first event; 0 where time is
    #: simulated and a timer fires at its instant
    timers_late_ms: float
    #: how long after a node decided its record of it may be stamped (a live node's records
    #: wait for the batch's group commit): what the rules that time one record against
    #: another allow; 0 where time is simulated
    records_late_ms: float
    #: how long a history line may wait in its file's buffer before it is flushed (None:
    #: each line flushed as it is written). A run killed outright loses at most that much
    #: of its history; a simulation's seed replays it
    history_flush_s: float | None
    #: how `describe` offers this substrate to a scenario that runs on another by default
    #: (its `mode` key): the flag and what it gives
    offer: str

    def refusal(self, scenario: Scenario, choice: Choice) -> str | None:
        """Why this substrate cannot run `scenario` with `choice`, in one line, or None."""

    def prepare(self, scenario: Scenario, choice: Choice) -> tuple[Scenario, Options]:
        """The scenario as it runs here (a simulation copying another broker's model) and
        the deployment options the choice comes to, once `refusal` found nothing."""

    def identity(self, scenario: Scenario, options: Options) -> Identity: ...

    def expect(self, scenario: Scenario, options: Options) -> dict[str, str]:
        """The verdicts the scenario expects where it runs here (it may expect others on one
        broker)."""

    def header(self, scenario: Scenario, options: Options) -> str:
        """The run header's words after the mode: where the broker and the nodes are."""

    def replay(self, scenario: Scenario, options: Options) -> list[str]:
        """The arguments after `--mode M --seed S` that run the same thing again."""

    def open(self, scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path,
             options: Options, say: Callable[[str], None]) -> Deployment:
        """The deployment of `scenario` here, not started yet."""

    # -- a matrix's cells ------------------------------------------------------------------
    def unspoken(self, scenario: Scenario, broker: str) -> str | None:
        """Why `broker` (as `identity` names it: a broker, or the model a simulation
        copies) cannot carry the scenario's MQTT version, in one line, or None."""

    def brokers(self, installed: bool = False) -> tuple[str, ...]:
        """The brokers a matrix cell may name here (live: those it starts by name; a
        simulation: the brokers it has a model of; docker: those it runs in a container);
        `installed`: only those this machine has (a matrix's `brokers = ["@installed"]`)."""

    def cells(self, brokers: list[str], models: list[str], hostings: list[str],
              scenario_nodes: str | None) -> list[tuple[str, str]]:
        """(broker, nodes) of each cell a matrix group makes here, from the group's
        `brokers` (live brokers), `models` (sim broker models) and `nodes` (hostings), and
        the hosting a scenario asks for (`live_nodes`)."""

    def cell_name(self, broker: str, nodes: str) -> list[str]:
        """The parts a cell's id adds after its mode."""

    def cell_choice(self, broker: str, nodes: str) -> Choice: ...

    def unmodelled(self, scenario: Scenario, broker: str) -> dict[str, str]:
        """What a run here is declared not to show of `broker` (a model's gaps)."""

    # -- reports ---------------------------------------------------------------------------
    def place(self, broker: str, nodes: str) -> str:
        """A cell's place for the fidelity table: substrates of one place are one column."""

    def label(self, recorded: dict[str, object]) -> str:
        """How a stored run's scenario.json (or summary.json) says where it ran, for
        `a2a-bench runs` and report headers."""

    def tag(self, recorded: dict[str, object]) -> str:
        """The same in a few characters (`sim/mosquitto`, `live/amqtt/process`), for labels
        that tell runs apart."""


@dataclass(frozen=True, slots=True)
class Compared:
    """A pair of places the fidelity table compares: the model (the first of `model` a
    matrix ran) against the real thing (the first of `real`), named `name`;
    `timing_declared`: a verdict the scenario takes either way on the real side's broker
    is declared, not counted."""

    model: tuple[str, ...]
    real: tuple[str, ...]
    name: str
    timing_declared: bool = True


#: Fidelity: which places (`Substrate.place`) are compared. A pair is made where both
#: sides exist; rows come in this order within one compared cell.
COMPARED = (Compared(("sim",), ("docker",), "sim vs docker"),
            Compared(("live", "live process"), ("docker",), "live vs docker"),
            Compared(("live",), ("live process",), "inproc vs process", timing_declared=False),
            Compared(("sim",), ("live", "live process"), "sim vs live"))


def flags_given(choice: Choice, *names: str) -> list[str]:
    """The CLI flags of `names` (Choice fields) the user gave, as the CLI spells them."""
    spelled = {"nodes": "--nodes", "broker_ca": "--broker-ca",
               "restart_command": "--broker-restart-command", "no_isolation": "--no-isolation",
               "keep": "--keep", "swarm": "--swarm", "wire_tap": "--wire-tap",
               "hosts": "--hosts"}
    return [spelled[n] for n in names if getattr(choice, n)]


def url_broker_refusal(choice: Choice, starts: str) -> str | None:
    """--broker-ca, --broker-restart-command and --no-isolation, which are for a broker by
    URL, given to a substrate that starts its own broker (`starts`: how it says so)."""
    given = flags_given(choice, "broker_ca", "restart_command", "no_isolation")
    return f"{', '.join(given)}: for a broker by URL (--mode live); {starts}" if given else None


#: Refusals of the flags one substrate owns, as every other substrate says them.
KEEP_IS_DOCKERS = ("--keep applies to --mode docker (a live run's broker and nodes are "
                   "this process's children and end with it)")
SWARM_IS_DOCKERS = "--swarm applies to --mode docker (it chooses the containers' network)"
HOSTS_ARE_HOSTS = ("--hosts applies to --mode hosts (the broker and nodes on the hosts it "
                   "lists, by SSH) and --mode docker (containers on those hosts' engines)")


def own_nodes_refusal(scenario: Scenario, *, runs_commands: bool,
                      runs_images: bool) -> str | None:
    """Nodes the topology gives a program or an image of their own, where this substrate
    cannot run them."""
    if scenario.image_nodes and not runs_images:
        return (f"{', '.join(scenario.image_nodes)} are images of their own (image = \"…\" in "
                "the topology): that is --mode docker only")
    if scenario.command_nodes and not runs_commands:
        return (f"{', '.join(scenario.command_nodes)} run a command of their own "
                "(--node-command, or command = [...] in the topology): that is --mode live "
                "only (the simulator runs the reference core; docker runs the bench's image)")
    return None
