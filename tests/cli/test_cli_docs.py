"""docs/cli.md and docs/models.md say what the code does: exit codes and what is in the reuse identity."""

from __future__ import annotations

import re
import signal
from pathlib import Path

from agentcompass import cli
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
