from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import EXIT_FALSE, EXIT_INVALID, EXIT_OK, main
from bench.core.task import TaskService
from bench.history import read_jsonl


@pytest.mark.parametrize("auth", ["loose", "strict", "audit"])
@pytest.mark.parametrize("signature", ["1", "2"])
def test_exchange_passes_and_keeps_its_record(tmp_path: Path, auth: str, signature: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["exchange", "--out", str(out), "--auth", auth, "--signature", signature]) == EXIT_OK
    printed = capsys.readouterr().out
    assert "verdict: all checks passed" in printed
    lines = list(read_jsonl(out / "history.jsonl"))
    assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1))
    assert f"({len(lines)} events)" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] is True and summary["executions"]["req-1"] == 1
    assert (out / "data" / "exec-1" / "a2a-node.db").exists()
    assert (out / "data" / "exec-1" / "a2a-agents.json").exists()


def test_exchange_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["exchange", "--out", str(tmp_path), "--json", "--requests", "5"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and set(data["outcomes"]) >= {f"req-{i}" for i in range(1, 6)}


def test_exchange_checks_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A task service that forgets requestIds re-runs the retry: the check must say so."""
    original = TaskService.on_request

    def forgetful(self: TaskService, fx, env, agent_id):  # type: ignore[no-untyped-def]
        self.tasks.clear()
        original(self, fx, env, agent_id)

    monkeypatch.setattr(TaskService, "on_request", forgetful)
    assert main(["exchange", "--out", str(tmp_path)]) == EXIT_FALSE
    printed = capsys.readouterr().out
    assert "[FAIL] no duplicate execution" in printed
    assert "req-1            COMPLETED      executed 2x" in printed


@pytest.mark.parametrize("argv", [["exchange", "--requests", "0"], ["exchange", "--auth", "lax"],
                                  ["nonsense"], []])
def test_bad_arguments_exit_3(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        rc = main(argv)
        raise SystemExit(rc)
    assert exc.value.code == EXIT_INVALID
