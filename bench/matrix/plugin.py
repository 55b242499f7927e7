"""A pytest plugin that collects a matrix file as one test item per cell, so pytest-xdist
runs the cells in parallel and `-k`, `--lf` and `--junitxml` work on cells.

`a2a-bench matrix` loads it (`-p bench.matrix.plugin`); it can also be used directly:
`pytest -p bench.matrix.plugin --matrix-out results/x path/to/x.matrix.toml -n 2`.
A finished cell (its cell.json exists) is not run again: it reports its stored result.

Across machines (`a2a-bench matrix --tx …`, pytest-xdist's own remote workers): each host
runs its cells in its own checkout's results folder and sends each finished cell back with
its report (`--matrix-ship`: the folder, zipped, as a report property); the controller
unpacks it into its own results folder, where the report is drawn. The cells finished
before are left out (`--matrix-skip`), since no host but this one has them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bench.folders import pack, unpack
from bench.matrix import Cell, cell_dir, cell_protocols, finished, load_matrix, run_cell

if TYPE_CHECKING:
    from bench.matrix.report import EarlyGrids


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("a2a-bench matrix")
    group.addoption("--matrix-out", default=None,
                    help="the matrix's results folder (cells land in <it>/cells/)")
    group.addoption("--matrix-ship", action="store_true",
                    help="send each finished cell's folder back with its report (remote hosts)")
    group.addoption("--matrix-skip", default="",
                    help="cell ids, comma-separated, not to run (finished before)")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    skip = {s for s in str(config.getoption("matrix_skip") or "").split(",") if s}
    if skip:
        keep = [i for i in items if not (isinstance(i, CellItem) and i.cell.id in skip)]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
    _largest_protocol_first(items)


def _largest_protocol_first(items: list[pytest.Item]) -> None:
    """The cells run protocol by protocol, the one with the most cells first (each in the
    matrix's order): its verdict grid, the report's largest plot, is drawn while the
    others' cells run (`EarlyGrids`), not after the last cell. Every worker orders its
    items alike (pytest-xdist schedules by index)."""
    files = {i.path for i in items if isinstance(i, CellItem)}
    if len(files) != 1:
        return
    protocols = cell_protocols(load_matrix(files.pop()))
    if len(set(protocols.values())) < 2:
        return
    size: dict[str, int] = {}
    for p in protocols.values():
        size[p] = size.get(p, 0) + 1
    rank = {p: -n for p, n in size.items()}
    items.sort(key=lambda i: rank.get(protocols.get(i.cell.id, ""), 0)
               if isinstance(i, CellItem) else 0)


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.name.endswith(".matrix.toml"):
        return MatrixFile.from_parent(parent, path=file_path)
    return None


class CellFailed(Exception):
    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(record["cell"]["id"])
        self.record = record


class MatrixFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        for cell in load_matrix(self.path).cells:
            yield CellItem.from_parent(self, name=cell.id, cell=cell)


class CellItem(pytest.Item):
    def __init__(self, *, cell: Cell, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cell = cell

    def _out(self) -> Path:
        out = self.config.getoption("matrix_out")
        return Path(out) if out else self.path.parent

    def runtest(self) -> None:
        out = self._out()
        record = finished(out, self.cell)
        cached = record is not None
        t0 = time.perf_counter()
        if record is None:
            record = run_cell(out, self.cell)
        verdicts = record["verdicts"]
        short = "".join({"true": "T", "false": "F", "unknown": "?"}[v] for v in verdicts.values()) \
            or ("refused" if "refused" in record else "")
        self.user_properties.append(("cell", json.dumps({
            "id": self.cell.id, "cached": cached, "passed": record["passed"], "verdicts": short,
            "wall_s": round(time.perf_counter() - t0, 2), "wrong": record["wrong"]})))
        if self.config.getoption("matrix_ship"):
            self.user_properties.append(("cell_files", pack(cell_dir(out, self.cell))))
        if not record["passed"]:
            raise CellFailed(record)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],  # type: ignore[override]
                     style: Any = None) -> str:
        if isinstance(excinfo.value, CellFailed):
            r = excinfo.value.record
            if "refused" in r:
                return f"cell {r['cell']['id']}: {r['refused']}"
            wrong = ", ".join(f"{k} {v} (expected {r['expect'][k]})" for k, v in r["wrong"].items())
            return (f"cell {r['cell']['id']}: {wrong}\n  replay: {r['replay']}\n"
                    f"  results: {self._out() / 'cells' / r['cell']['id']}/")
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"cell {self.cell.id}"


class _Progress:
    """One line per finished cell on the controller: i/N, pass/fail, verdicts, time."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._cells: dict[str, Cell] | None = None
        self.total = 0
        self.done = 0
        self.t0 = time.perf_counter()
        self.legend_shown = False
        self.early: EarlyGrids | None = None   # -j > 1: grids begun while the cells run

    def cell(self, cell_id: str) -> Cell:
        """A cell of the matrix this session runs (the first *.matrix.toml argument), the
        file read once for all the cells hosts send back."""
        if self._cells is None:
            path = next(Path(a) for a in self.config.args if a.endswith(".matrix.toml"))
            self._cells = {c.id: c for c in load_matrix(path).cells}
        return self._cells[cell_id]

    def _legend(self) -> None:
        """Once, before the first cell: what the letters of a cell's line stand for."""
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.legend_shown or tr is None:
            return
        self.legend_shown = True
        from bench.checks import checkers_for
        from bench.protocols import protocols
        tr.write_line("each cell's letters are its verdicts (T true, F false, ? unknown), in "
                      "the order of its protocol's checkers: " + "; ".join(
                          f"{p.title}: " + " ".join(checkers_for(p.name))
                          for p in protocols().values()))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.total = max(self.total, len(ids))
        self._legend()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.total = max(self.total, len(session.items))
        self._legend()

    def pytest_report_teststatus(self, report: pytest.TestReport,
                                 config: pytest.Config) -> tuple[str, str, str] | None:
        if report.when == "call" and "cell" in dict(report.user_properties):
            return report.outcome, "", report.outcome.upper()   # our line below, not a dot
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if report.when != "call" or "cell" not in props:
            return
        info = json.loads(str(props["cell"]))
        out = self.config.getoption("matrix_out")
        if "cell_files" in props and out:     # a cell a host ran: into this results folder
            unpack(str(props["cell_files"]), cell_dir(Path(out), self.cell(info["id"])))
        self.done += 1
        if self.early is not None:
            self.early.finished(info["id"])
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            return
        mark = "ok  " if info["passed"] else "FAIL"
        how = "done before" if info["cached"] else f"{info['wall_s']:6.1f} s"
        elapsed = time.perf_counter() - self.t0
        line = (f"[{self.done:>3}/{self.total or '?'}] {mark} {info['id']:<62} {info['verdicts']}  "
                f"{how}  (elapsed {elapsed:.0f} s)")
        tr.write_line(line, red=not info["passed"], green=info["passed"] and not info["cached"])


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):   # the controller (or a run without xdist)
        progress = _Progress(config)
        config.pluginmanager.register(progress, "a2a-matrix-progress")
        workers = getattr(config.option, "numprocesses", None)
        out = config.getoption("matrix_out", None)
        if out and isinstance(workers, int) and workers > 1:
            from bench.matrix.report import EarlyGrids, plot_server
            plot_server()    # its imports done while the cells run, not after the last
            sources = [Path(a) for a in config.args if a.endswith(".matrix.toml")]
            if sources:
                progress.early = EarlyGrids(Path(out), load_matrix(sources[0]))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return
    out = session.config.getoption("matrix_out")
    if not out:
        return
    from bench.matrix.report import write_matrix_report
    sources = sorted(Path(out).glob("*.matrix.toml"))
    if sources:
        # its plots drawn as many at a time as the matrix had workers (-j)
        workers = getattr(session.config.option, "numprocesses", None)
        progress = session.config.pluginmanager.get_plugin("a2a-matrix-progress")
        paths = write_matrix_report(Path(out), load_matrix(sources[0]),
                                    workers if isinstance(workers, int) else 1,
                                    getattr(progress, "early", None))
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.ensure_newline()
            tr.write_line(f"matrix report: {paths['md']}  {paths['html']}")
