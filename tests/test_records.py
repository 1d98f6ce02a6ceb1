"""Progress events as docs/api.md describes them: each tagged by its ``event`` name, readable as ``ev.event``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args

import msgspec

import agentcompass
from agentcompass import records
from agentcompass.records import ProgressEvent

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _documented_events() -> dict[str, str]:
    """The progress events table of docs/api.md: event name -> class name."""
    section = (DOCS / "api.md").read_text().split("## Progress events", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([a-z_]+)` \| `([A-Za-z]+)` \|", section, flags=re.M))


def test_the_documented_event_names_are_the_event_classes_tags() -> None:
    documented = _documented_events()
    classes = {cls.__struct_config__.tag: cls.__name__ for cls in get_args(ProgressEvent)}
    assert documented == classes
    for name, cls_name in documented.items():
        cls = getattr(records, cls_name)
        fields = {f.name: _sample(f.type) for f in msgspec.structs.fields(cls) if f.required}
        assert cls(**fields).event == name


def _sample(tp: Any) -> Any:
    """A value of a required field's type, enough to build an event."""
    tp = next((a for a in get_args(tp) if a is not type(None)), tp)
    if tp in (int, float):
        return tp(1)
    if tp is bool:
        return True
    if tp is dict or getattr(tp, "__origin__", None) is dict:
        return {}
    return "x"


def test_on_progress_reads_each_events_kind_as_ev_event(tmp_path: Path) -> None:
    kinds: list[str] = []

    def on_progress(ev: ProgressEvent) -> None:  # the documented usage: dispatch on ev.event
        kinds.append(ev.event)

    out = agentcompass.run_evaluation("shell_tasks", "none", "scripted", results_dir=str(tmp_path), progress="none",
                                      benchmark_params={"sample_ids": ["answer/count_lines"]},
                                      on_progress=on_progress)
    assert out.status == "completed" and out.run_dir is not None
    lines = (out.run_dir / "progress.jsonl").read_bytes().splitlines()
    assert kinds == [json.loads(line)["event"] for line in lines]
    assert kinds[0] == "request_started" and kinds[-1] == "request_finished" and "task_finished" in kinds
    decoded = [msgspec.json.decode(line, type=ProgressEvent) for line in lines]  # as api.md says to decode one
    assert [ev.event for ev in decoded] == kinds
