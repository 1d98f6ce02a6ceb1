"""The ``predictions`` harness: grades a predictions file instead of running an agent, as the SWE-bench harness
does with ``--predictions_path``.

A predictions file is a JSON list of objects, a JSON object mapping each instance id to one (the official
harness's ``preds.json``), or JSON Lines (``predictions.jsonl``), each object with ``instance_id``,
``model_patch`` (the diff; ``null`` or empty for no change) and ``model_name_or_path``; other keys are ignored.
Each task's prediction is its submitted patch: the benchmark grades it in a fresh verifier environment, with no
agent environment and no model call. A task the file has no prediction for submits nothing (graded unresolved).
``agentcompass evaluate BENCHMARK --predictions FILE`` runs exactly the file's instances.

The file is untrusted input: read once, at most ``MAX_PREDICTIONS_BYTES``, a link to it is followed as the user
gave it, and a malformed entry is a ``ConfigError`` naming the file, the entry and the field.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from .._errors import ConfigError
from ..interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ..records import Trajectory
from .base import Harness

__all__ = ["MAX_PREDICTIONS_BYTES", "Prediction", "Predictions", "load_predictions", "model_names"]

#: the largest predictions file read (SWE-bench's full split of 2,294 patches is well under 100 MB)
MAX_PREDICTIONS_BYTES = 512 << 20
_WHERE = "harness predictions"


class Prediction(msgspec.Struct, frozen=True):
    """One instance's prediction, as the SWE-bench harness reads it."""

    instance_id: str
    model_patch: str | None = None
    model_name_or_path: str | None = None


class PredictionsParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``predictions`` params: ``file``, the predictions file (JSON list or object, or JSON Lines)."""

    file: str = ""


def _bad(path: str, what: str) -> ConfigError:
    return ConfigError(f"Invalid `harness_params.file` {path!r}: {what}", field="harness_params.file")


def _decode_error(exc: msgspec.MsgspecError) -> str:
    text = str(exc)
    if "Expected `object`" in text or "Expected `array | object`" in text:
        return f"expected objects with instance_id, model_patch and model_name_or_path ({text})"
    return text


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_PREDICTIONS_BYTES:
                raise _bad(path, f"{size} bytes, over the {MAX_PREDICTIONS_BYTES} bytes read at most.")
            raw = f.read(MAX_PREDICTIONS_BYTES + 1)
    except OSError as exc:
        raise _bad(path, f"cannot read it ({exc.strerror or exc}).") from None
    if len(raw) > MAX_PREDICTIONS_BYTES:
        raise _bad(path, f"over the {MAX_PREDICTIONS_BYTES} bytes read at most.")
    return raw


def _decode_lines(path: str, raw: bytes) -> list[Prediction]:
    out: list[Prediction] = []
    decoder = msgspec.json.Decoder(Prediction)
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(decoder.decode(line))
        except msgspec.DecodeError as exc:  # ValidationError included
            raise _bad(path, f"line {n} is not a prediction: {_decode_error(exc)}.") from None
        except RecursionError:
            raise _bad(path, f"line {n}: JSON nested too deeply to read.") from None
    return out


def _is_prediction(line: bytes) -> bool:
    try:
        msgspec.json.decode(line, type=Prediction)
    except (msgspec.DecodeError, RecursionError):
        return False
    return True


def _decode(path: str, raw: bytes) -> list[Prediction]:
    if path.endswith(".jsonl"):
        return _decode_lines(path, raw)
    try:
        doc = msgspec.json.decode(raw, type=list[Prediction] | dict[str, Prediction])
    except msgspec.DecodeError as exc:  # ValidationError included
        lines = [line for line in raw.splitlines() if line.strip()]
        if len(lines) > 1 and _is_prediction(lines[0]):  # JSON Lines under another name
            return _decode_lines(path, raw)
        raise _bad(path, f"not a predictions file: {_decode_error(exc)}.") from None
    except RecursionError:
        raise _bad(path, "JSON nested too deeply to read.") from None
    if isinstance(doc, dict):
        for key, pred in doc.items():
            if key != pred.instance_id:
                raise _bad(path, f"the entry under {key!r} has instance_id {pred.instance_id!r}.")
        return list(doc.values())
    return doc


def load_predictions(path: str | os.PathLike[str]) -> dict[str, Prediction]:
    """The predictions of ``path`` by instance id, in file order; a ``ConfigError`` naming the file for an
    unreadable, oversized or malformed file, an empty one, or an instance predicted twice."""
    shown = str(path)
    preds = _decode(shown, _read(shown))
    if not preds:
        raise _bad(shown, "it holds no predictions.")
    out: dict[str, Prediction] = {}
    for pred in preds:
        if not pred.instance_id:
            raise _bad(shown, "a prediction has an empty instance_id.")
        if pred.instance_id in out:
            raise _bad(shown, f"instance {pred.instance_id!r} is predicted twice.")
        out[pred.instance_id] = pred
    return out


def model_names(predictions: dict[str, Prediction]) -> list[str]:
    """The distinct ``model_name_or_path`` values the predictions give, sorted."""
    return sorted({p.model_name_or_path for p in predictions.values() if p.model_name_or_path})


class Predictions(Harness):
    """Submits each task's prediction from a file (params: ``PredictionsParams``); no agent, no model call."""

    name: ClassVar[str] = "predictions"
    needs_environment: ClassVar[bool] = False
    calls_model: ClassVar[bool] = False
    submits_patches: ClassVar[bool] = True
    Params: ClassVar[type[PredictionsParams]] = PredictionsParams
    params: PredictionsParams

    def __init__(self, params: PredictionsParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        if not self.params.file:
            raise ConfigError(f"{_WHERE}: `harness_params.file` is required: the predictions file to grade.",
                              field="harness_params.file")
        self.predictions = load_predictions(Path(self.params.file).expanduser())
        self.model_names = model_names(self.predictions)

    def resolved_settings(self) -> dict[str, Any]:
        return {"predictions": len(self.predictions), "model_name_or_path": self.model_names}

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        now = time.time()
        pred = self.predictions.get(task.task_id)
        if pred is None:
            log.warning("%s: no prediction for %s: it submits nothing", _WHERE, task.task_id)
            return HarnessResult(patch="", trajectory=Trajectory(started_at=now, finished_at=now,
                                                                 stop_reason="no_prediction"))
        return HarnessResult(patch=pred.model_patch or "", artifacts={"model_name_or_path": pred.model_name_or_path},
                             trajectory=Trajectory(started_at=now, finished_at=now, stop_reason="prediction"))
