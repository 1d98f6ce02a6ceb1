"""`run --run-id X [--reuse] [--overwrite]` never writes over an earlier run silently."""

from __future__ import annotations

from pathlib import Path

from .test_cli import cli


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_an_existing_run_id_is_never_overwritten_without_overwrite(tmp_path: Path) -> None:
    base = ["run", "shell_tasks", "shell_agent", "scripted", "--progress", "none", "--results-dir", str(tmp_path),
            "--run-id", "X"]
    first = cli(*base, "--benchmark-params", '{"categories": ["files"]}')
    assert first.returncode == 0, first.stderr
    run_dir = tmp_path / "shell_tasks" / "shell_agent" / "scripted" / "X"
    before = _snapshot(run_dir)
    changed = cli(*base, "--reuse", "--benchmark-params", '{"categories": ["answer"]}')
    assert changed.returncode == 2, changed.stdout + changed.stderr
    assert "benchmark_params.categories: ['files'] -> ['answer']" in changed.stderr
    assert "--overwrite" in changed.stderr and "Traceback" not in changed.stderr
    plain = cli(*base, "--benchmark-params", '{"categories": ["files"]}')  # no --reuse: refused as well
    assert plain.returncode == 2 and "already exists" in plain.stderr
    assert _snapshot(run_dir) == before
    over = cli(*base, "--reuse", "--overwrite", "--benchmark-params", '{"categories": ["answer"]}')
    assert over.returncode == 0, over.stderr
    (backup,) = [p for p in run_dir.parent.iterdir() if p.name.startswith("X.overwritten-")]
    assert _snapshot(backup) == before
    assert '"answer"' in (run_dir / "params.json").read_text()
