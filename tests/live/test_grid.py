"""`a2a-bench grid` (issue 46): brokers x responders x requesters, one command; each cell
judged per role, a violation counted against the side it is about."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.cli import EXIT_UNKNOWN, main
from bench.conform import ELSEWHERE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_a_cell_of_two_implementations_blames_each_for_its_own(tmp_path: Path) -> None:
    """The example responder with --bug clean-start (A2M-SESS-5, a session clause that binds
    both roles) against the example requester: the responder's table FAILs it, the
    requester's does not — it says the violation was not its own."""
    responder = f"{sys.executable} {EXAMPLES / 'a2a-responder' / 'responder.py'} --bug clean-start"
    requester = f"{sys.executable} {EXAMPLES / 'a2a-requester' / 'requester.py'}"
    out = tmp_path / "grid"
    code = main(["grid", "--no-reference", "--responder", f"bad={responder}",
                 "--requester", f"ex={requester}", "--only", "a2a_quickstart",
                 "--out", str(out)])
    assert code == EXIT_UNKNOWN     # a SHOULD that fails fails no cell; other rows UNKNOWN
    grid = json.loads((out / "grid.json").read_text())
    (cell,) = grid["cells"]
    assert (cell["responder"]["name"], cell["requester"]["name"]) == ("bad", "ex")
    assert cell["responder"]["failed"] == [{"ids": "A2M-SESS-5", "level": "SHOULD"}], \
        cell["responder"]
    assert cell["requester"]["failed"] == []
    tables = {role: json.loads((out / cell["folder"] / role / "compatibility.json").read_text())
              for role in ("responder", "requester")}
    session = {role: next(c for c in t["clauses"] if c["ids"] == ["A2M-SESS-5"])
               for role, t in tables.items()}
    assert session["responder"]["status"] == "FAIL"
    assert "clean start 1" in session["responder"]["evidence"]
    assert session["requester"]["status"] == "UNKNOWN"
    assert session["requester"]["evidence"].startswith(ELSEWHERE), session["requester"]
    # each row's replay makes this cell again, alone
    replay = session["responder"]["replay"]
    assert replay.startswith("a2a-bench grid --broker mosquitto --no-reference --responder")
    assert replay.endswith("--only a2a_quickstart")
    assert tables["requester"]["implementation"]["name"] == "ex"
    page = (out / "grid.html").read_text()
    assert "responder <b>bad</b>" in page and "requester <b>ex</b>" in page
