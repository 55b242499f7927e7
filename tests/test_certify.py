"""What `a2a-bench conform` leaves beside its table (issue 46, certification output): levels
as A2A's TCK has them, compatibility.json and JUnit XML valid against the schemas in
docs/schemas, and the HTML page; from made-up rows, then from one short run of the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest
import xmlschema

from bench.certify import SCHEMAS, Meta, compatibility, exit_code, junit, page, write
from bench.checks import NOT_APPLICABLE
from bench.cli import EXIT_INVALID, main
from bench.conform import PROFILES, Row

SCHEMA = json.loads((SCHEMAS / "compatibility.schema.json").read_text())
JUNIT = xmlschema.XMLSchema(str(SCHEMAS / "junit.xsd"))
#: what a row says that an agent declaring it handles no bearer tokens leaves out
NO_TOKENS = NOT_APPLICABLE + PROFILES["a2a-mqtt"].declared({"no-tokens"})[0].why
BY_LEVEL = {}
for _rule in PROFILES["a2a-mqtt"].rules:
    _row = Row(_rule, "PASS", "judged in a2a_quickstart", "a2a_quickstart")
    BY_LEVEL.setdefault(_row.level, _rule)


def rows(must: str = "PASS", should: str = "PASS", unknown: bool = False) -> list[Row]:
    out = [Row(BY_LEVEL["MUST"], must, "a2a_restart: a2a_requests.x: tax-1 ran T1 twice"
               if must == "FAIL" else "judged in a2a_restart", "a2a_restart"),
           Row(BY_LEVEL["SHOULD"], should, "a2a_tampered: a2a_replies.y: it answered"
               if should == "FAIL" else "judged in a2a_tampered", "a2a_tampered"),
           Row(BY_LEVEL["MUST"], "UNKNOWN", NO_TOKENS, "a2a_oauth")]
    if unknown:
        out.append(Row(BY_LEVEL["SHOULD"], "UNKNOWN", "a2a_pool: not run", "a2a_pool"))
    return out


def meta(tmp_path: Path, strict: bool = False) -> Meta:
    return Meta(("python", "my agent.py"), "a2a-mqtt", "responder", "mosquitto", tmp_path,
                {"a2a_restart": 1, "a2a_tampered": 1, "a2a_oauth": 1, "a2a_pool": 1},
                "my-sdk 1.2.3", strict)


@pytest.mark.parametrize(("must", "should", "unknown", "strict", "code"), [
    ("PASS", "PASS", False, False, 0),      # a declared-out row is no failure
    ("PASS", "PASS", True, False, 2),       # an UNKNOWN is not a PASS
    ("FAIL", "PASS", False, False, 1),      # a MUST fails the run
    ("PASS", "FAIL", False, False, 0),      # a SHOULD is reported...
    ("PASS", "FAIL", True, False, 2),
    ("PASS", "FAIL", False, True, 1),       # ... and fails it under --strict
])
def test_levels_decide_the_exit_as_the_tck_has_them(
        tmp_path: Path, must: str, should: str, unknown: bool, strict: bool, code: int) -> None:
    made = rows(must, should, unknown)
    assert exit_code(made, strict) == code
    c = compatibility(made, meta(tmp_path, strict))
    jsonschema.validate(c, SCHEMA)
    assert c["exitCode"] == code
    assert [e["failsTheRun"] for e in c["clauses"][:2]] == \
        [must == "FAIL", should == "FAIL" and strict]
    xml = junit(made, meta(tmp_path, strict))
    JUNIT.validate(xml)
    cases = ET.fromstring(xml).iter("testcase")
    failed = [c.get("classname") for c in cases if c.find("failure") is not None]
    assert len(failed) == (code == 1) * ((must == "FAIL") + (should == "FAIL" and strict))


def test_a_row_names_its_run_seed_and_the_commands_that_run_and_judge_it_again(
        tmp_path: Path) -> None:
    c = compatibility(rows("FAIL"), meta(tmp_path))
    first = c["clauses"][0]
    assert first["status"] == "FAIL" and first["scenario"] == "a2a_restart" and first["seed"] == 1
    assert first["replay"] == ("a2a-bench conform --protocol a2a-mqtt --broker mosquitto --only "
                               "a2a_restart 'python '\"'\"'my agent.py'\"'\"''")
    assert first["stored"] == f"a2a-bench check {tmp_path / 'a2a_restart'}"
    assert c["clauses"][2]["status"] == "NOT_APPLICABLE"
    assert c["implementation"] == {"command": ["python", "my agent.py"], "version": "my-sdk 1.2.3"}
    # the schema holds what it says: a row without its replay is refused
    del first["replay"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(c, SCHEMA)


def test_the_page_says_what_fails_the_run_and_escapes_what_it_shows(tmp_path: Path) -> None:
    made = rows("FAIL")
    made[0] = Row(made[0].rule, "FAIL", "tax-1 said <script>", "a2a_restart")
    html = page(made, meta(tmp_path))
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert html.count("fails the run") == 1 and "exit 1" in html
    assert [p.name for p in write(made, meta(tmp_path))] == \
        ["compatibility.json", "junit.xml", "conform.html"]


def test_only_a_run_the_suite_has(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conform", "--profile", "a2a-mqtt", "--only", "nope", "--out",
                 str(tmp_path / "c"), "python x.py"]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--only=nope: not a run of this suite" in err[0] \
        and "a2a_quickstart" in err[0], err
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_one_run_of_the_cli_leaves_a_valid_compatibility_json_and_junit_xml(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "conform"
    code = main(["conform", "--only", "quickstart", "--impl-version", "reference", "--out",
                 str(out), f"{sys.executable} -m bench.substrates.live.node_process"])
    said = capsys.readouterr().out
    c = json.loads((out / "compatibility.json").read_text())
    jsonschema.validate(c, SCHEMA)
    JUNIT.validate(str(out / "junit.xml"))
    assert c["exitCode"] == code == 2          # one run of nine: most rows not run
    assert c["counts"]["FAIL"] == 0 and c["counts"]["PASS"] > 0, said
    judged = [e for e in c["clauses"] if e["status"] == "PASS"]
    assert all(e["scenario"] == "quickstart" and e["seed"] == 1 for e in judged)
    assert judged[0]["replay"].startswith("a2a-bench conform --broker amqtt --only quickstart ")
    assert f"report: {out / 'compatibility.json'}" in said
