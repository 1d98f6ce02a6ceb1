"""Inputs that used to be accepted silently: JSON null for a params flag, a non-callable on_progress."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentcompass
from agentcompass import cli
from agentcompass._errors import ConfigError

FLAGS = ("--benchmark-params", "--harness-params", "--env-params", "--model-params", "--provider-limits")


@pytest.mark.parametrize("flag", FLAGS)
@pytest.mark.parametrize("value", ["null", "5", '"x"', "[]"])
def test_a_params_flag_that_is_not_a_json_object_names_the_flag(flag: str, value: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["run", "shell_tasks", "shell_agent", "scripted", flag, value, "--progress", "none",
                     "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and f"Invalid `{flag}`: expected a JSON object" in err, err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("bad", [5, "print", object()])
def test_on_progress_must_be_callable(bad: object, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="on_progress") as info:
        agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", results_dir=str(tmp_path),
                                    progress="none", on_progress=bad)  # type: ignore[arg-type]
    assert info.value.field == "on_progress"
    with pytest.raises(ConfigError, match="on_progress"):
        agentcompass.launch({"requests": []}, on_progress=bad)  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())


def test_show_escapes_control_characters_from_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    run = tmp_path / "r"
    run.mkdir()
    info = {"run_id": "r", "request": "r", "status": "failed", "benchmark": "b", "harness": "h", "model": "m",
            "environment": "local", "started_at": 1.0e9, "paths": {}, "error": "first: t\x1b]0;pwned\x07: boom",
            "by_category": {"c\x1b[2J": {"pass@1": 0.5}}}
    (run / "run_info.json").write_text(json.dumps(info))
    assert cli.main(["show", str(run)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;pwned" in out, repr(out)
