"""docs/cli.md, docs/api.md and docs/models.md say what the code does: exit codes, the reuse identity, links."""

from __future__ import annotations

import ast
import inspect
import json
import re
import shlex
import signal
from pathlib import Path

import pytest

from agentcompass import cli, run_evaluation
from agentcompass.engine.identity import OPERATIONAL_ENV_PARAMS, OPERATIONAL_MODEL_PARAMS, SELECTION_PARAMS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_documented_exit_codes_are_the_clis() -> None:
    text = (DOCS / "cli.md").read_text()
    block = text.split("Exit codes:", 1)[1].split("\n\n", 1)[0]
    documented = {int(n) for n in re.findall(r"`(\d+)`", block)}
    constants = {v for k, v in vars(cli).items() if k.startswith("EXIT_")}
    assert documented == constants
    assert cli.EXIT_TERMINATED == 128 + signal.SIGTERM


def test_the_documented_reuse_identity_is_the_codes() -> None:
    models = " ".join((DOCS / "models.md").read_text().split())
    sentence = models.split("Model params are part of the reuse identity", 1)[1].split(".", 1)[0]
    assert set(re.findall(r"`([a-z_]+)`", sentence)) == set(OPERATIONAL_MODEL_PARAMS)
    assert "so they are part of the reuse identity" not in models  # retry keys are operational
    rundir = " ".join((DOCS / "run-directory.md").read_text().split())
    section = rundir.split("## Identity hash", 1)[1]
    for key in (*SELECTION_PARAMS, *OPERATIONAL_MODEL_PARAMS, *OPERATIONAL_ENV_PARAMS):
        assert f"`{key}`" in section or f"{key}," in section or f"{key}}}" in section, key


def _fenced(text: str, lang: str, needle: str) -> str:
    """The first ```lang block of ``text`` that contains ``needle``."""
    blocks = re.findall(rf"```{lang}\n(.*?)```", text, flags=re.DOTALL)
    return next(b for b in blocks if needle in b)


def test_the_swebench_walkthroughs_python_and_cli_commands_are_the_same_valid_call() -> None:
    text = (DOCS / "swebench.md").read_text()
    snippet = _fenced(text, "python", "run_evaluation(")
    call = next(n for n in ast.walk(ast.parse(snippet)) if isinstance(n, ast.Call)
                and getattr(n.func, "id", None) == "run_evaluation")
    kwargs = {k.arg: k.value for k in call.keywords}
    assert set(kwargs) <= set(inspect.signature(run_evaluation).parameters)
    literal = {k: ast.literal_eval(v) for k, v in kwargs.items() if not isinstance(v, ast.Subscript)}

    command = _fenced(text, "bash", "agentcompass run ").replace("\\\n", " ")
    argv = shlex.split(command)[1:]
    args = cli.build_parser().parse_args(argv)
    assert args.command == "run"
    assert (args.benchmark, args.harness, args.model, args.env) == (
        literal["benchmark"], literal["harness"], literal["model"], literal["environment"])
    assert json.loads(args.benchmark_params) == literal["benchmark_params"]
    assert args.model_base_url == "$MODEL_BASE_URL" and args.model_api_key is None  # the key comes from the env
    assert f"`{cli.API_KEY_ENV}`" in text
    assert "pip install 'agentcompass[swebench,mini-swe-agent]'" in text


def _slug(heading: str) -> str:
    """A markdown heading's anchor as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _api_row(field: str) -> str:
    """The row of ``field`` in the `run_evaluation` table of docs/api.md."""
    return next(line for line in (DOCS / "api.md").read_text().splitlines() if line.startswith(f"| `{field}` | "))


def test_the_api_pages_wrap_api_key_link_leads_to_the_models_section_on_envelopes() -> None:
    from agentcompass.models.gateway.envelope import PREFIX

    anchors = re.findall(r"\(models\.md#([\w-]+)\)", _api_row("wrap_api_key"))
    assert anchors, "the wrap_api_key row links to a section of models.md"
    models = (DOCS / "models.md").read_text()
    sections = {_slug(m.group(2)): m.start() for m in re.finditer(r"^(#+) (.+)$", models, flags=re.M)}
    assert anchors[0] in sections
    section = models[sections[anchors[0]]:].split("\n#", 1)[0]
    assert "`wrap_api_key`" in section and f"`{PREFIX}." in section


def test_the_api_page_says_which_components_use_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentcompass.common.data_dir import default_data_dir

    row = _api_row("data_dir")
    assert "no built-in component uses it" not in row
    assert "swebench" in row and "task_dir" in row and "<data_dir>/agents/" in row
    monkeypatch.setenv("AGENTCOMPASS_DATA_DIR", "/srv/data")  # the documented defaults are the code's
    assert "`$AGENTCOMPASS_DATA_DIR`" in row and default_data_dir(None) == Path("/srv/data")
    monkeypatch.delenv("AGENTCOMPASS_DATA_DIR")
    assert "`~/.cache/agentcompass/data`" in row
    assert default_data_dir(None) == Path("~/.cache/agentcompass/data").expanduser()


def _table(text: str, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the markdown table under ``header``."""
    block = text.split(header, 1)[1].split("\n\n", 1)[0]
    return [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in block.splitlines()[2:]]


def _first_code(cell: str) -> str:
    found = re.search(r"`([^`]*)`", cell)
    return found.group(1) if found else cell


def test_the_cli_pages_run_table_lists_every_flag_with_its_default() -> None:
    from agentcompass.run_options import RUN_OPTIONS

    rows = _table((DOCS / "cli.md").read_text(), "| flag | default | maps to |")
    documented = {_first_code(flag).split()[0]: default for flag, default, _ in rows
                  if _first_code(flag).startswith("--")}
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    actions = [a for a in sub.choices["run"]._actions if a.option_strings and a.dest != "help"]
    assert set(documented) == {a.option_strings[0] for a in actions}
    for action in actions:
        default = action.default
        expected = "off" if default is False else "—" if default is None else f"`{default}`"
        assert documented[action.option_strings[0]] == expected, action.option_strings[0]
    assert {o.flags[0] for o in RUN_OPTIONS if o.flags and o.flags[0].startswith("-")} <= set(documented)


def test_the_api_pages_run_evaluation_table_lists_every_argument_with_its_default() -> None:
    from agentcompass.run_options import SDK_DEFAULTS

    rows = _table((DOCS / "api.md").read_text(), "| argument | default | meaning |")
    assert [_first_code(arg) for arg, _, _ in rows] == list(inspect.signature(run_evaluation).parameters)
    for arg, default, _ in rows:
        name = _first_code(arg)
        if name not in SDK_DEFAULTS:
            assert default == "required", name
            continue
        value = SDK_DEFAULTS[name]
        assert _first_code(default) == (f'"{value}"' if isinstance(value, str) else repr(value)), name
