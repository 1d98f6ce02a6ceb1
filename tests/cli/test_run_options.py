"""`agentcompass run`'s flags, their help and defaults are built from the run options' declaration
(agentcompass/run_options.py), the same one run_evaluation and the specs use."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from agentcompass import cli
from agentcompass.run_options import OPTIONS_BY_NAME, RUN_OPTIONS, SDK_DEFAULTS, evaluation_spec


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _actions(name: str) -> dict[str, argparse.Action]:
    """The subcommand's actions by each of their flags (a positional by its dest)."""
    out: dict[str, argparse.Action] = {}
    for action in _subparser(name)._actions:
        for flag in action.option_strings or [action.dest]:
            out[flag] = action
    return out


def _help_text(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    monkeypatch.setenv("COLUMNS", "1000")  # one line per flag: a wrapped help would break at its hyphens
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_every_run_option_has_a_flag_with_help() -> None:
    actions = _actions("run")
    assert [o.name for o in RUN_OPTIONS if not o.flags] == ["on_progress"]  # a callable: SDK only
    for opt in RUN_OPTIONS:
        for flag in opt.flags:
            assert flag in actions, flag
            assert actions[flag].help and actions[flag].help.startswith(opt.help.replace("%", "%%")), flag
    assert all(a.help for a in actions.values()), [f for f, a in actions.items() if not a.help]


def test_run_help_shows_each_flags_help_and_default(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    text = _help_text(monkeypatch, capsys, "run")
    entries: list[str] = []  # one per argument: its line, and the help's line when argparse put it below
    for line in text.split("\n\n", 1)[1].splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            entries.append(line.strip())
        elif line.startswith("   ") and entries:
            entries[-1] += " " + line.strip()
    for opt in RUN_OPTIONS:
        if not opt.flags:
            continue
        line = next((e for e in entries if e.split()[0].rstrip(",") == opt.flags[0]), "")
        assert opt.help in line, opt.name
        shown = opt.default is not None and opt.default is not False and opt.flags[0].startswith("-")
        assert (f"(default: {opt.default})" in line) == shown, opt.name
    assert "(default: 120.0)" in text and "--model-api-key-file PATH" in text


def test_launch_and_list_take_their_shared_flags_help_from_the_declaration(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert OPTIONS_BY_NAME["progress"].help in " ".join(_help_text(monkeypatch, capsys, "launch", "x").split())
    assert _actions("launch")["--progress"].default is None  # the spec file's, unless the flag is given
    assert _actions("launch")["--progress"].choices == ["auto", "rich", "plain", "none"]
    assert OPTIONS_BY_NAME["recipe_dirs"].help in _help_text(monkeypatch, capsys, "list")


def _kwargs(monkeypatch: pytest.MonkeyPatch, *argv: str) -> dict[str, Any]:
    monkeypatch.delenv(cli.API_KEY_ENV, raising=False)
    return cli.run_kwargs(cli.build_parser().parse_args(["run", "b", "h", "m", *argv]))


def test_run_without_flags_is_run_evaluation_with_its_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    kwargs = _kwargs(monkeypatch)
    assert {k: v for k, v in kwargs.items() if k in SDK_DEFAULTS} == {
        k: v for k, v in SDK_DEFAULTS.items() if k != "on_progress"}
    assert evaluation_spec(kwargs) == evaluation_spec({"benchmark": "b", "harness": "h", "model": "m"})


def test_flags_reach_their_run_evaluation_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    kwargs = _kwargs(monkeypatch, "--env", "docker", "--env-params", '{"x": 1}', "--max-backoff-s", "5",
                     "--retry-pattern", "a", "--retry-pattern", "b", "--log-level", "info", "--enable-analysis",
                     "--recipe-dir", "r", "--run-name", "n", "--model-api-protocol", "anthropic-messages")
    assert kwargs["environment"] == "docker" and kwargs["environment_params"] == {"x": 1}
    assert kwargs["max_backoff_s"] == 5.0 and kwargs["retry_pattern_list"] == ["a", "b"]
    assert kwargs["log_level"] == "INFO" and kwargs["enable_analysis"] is True
    assert kwargs["recipe_dirs"] == ["r"] and kwargs["run_name"] == "n"
    assert kwargs["model_api_protocol"] == "anthropic-messages"


@pytest.mark.parametrize(("flag", "allowed"), [("--model-api-protocol", "openai-chat"), ("--log-level", "DEBUG"),
                                               ("--progress", "plain")])
def test_a_flag_of_a_fixed_set_refuses_another_value_naming_the_allowed_ones(
        flag: str, allowed: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["run", "b", "h", "m", flag, "bogus"])
    assert exit_.value.code == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert flag in err and "invalid choice" in err and allowed in err
