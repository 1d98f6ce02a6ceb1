"""One HTTP-status classification (``model_error_kind``) and one list of transient model kinds, read by the retry
policy, the adaptive limiter and the engine's failure policies; no other module classifies model statuses."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agentcompass.common.error_kinds import ErrorKind
from agentcompass.common.http_status import TRANSIENT_MODEL_KINDS, model_error_kind
from agentcompass.engine.failures import policy
from agentcompass.models.adaptive import AdaptiveLimiter, outcome_of
from agentcompass.models.retry import RetryPolicy

PACKAGE = Path(__file__).resolve().parents[2] / "agentcompass"

STATUS_KINDS = [
    (200, ErrorKind.MODEL_BAD_RESPONSE), (301, ErrorKind.MODEL_BAD_RESPONSE), (307, ErrorKind.MODEL_BAD_RESPONSE),
    (400, ErrorKind.MODEL_BAD_REQUEST), (401, ErrorKind.MODEL_AUTH), (403, ErrorKind.MODEL_AUTH),
    (404, ErrorKind.MODEL_BAD_REQUEST), (408, ErrorKind.MODEL_BAD_REQUEST), (413, ErrorKind.MODEL_BAD_REQUEST),
    (422, ErrorKind.MODEL_BAD_REQUEST), (429, ErrorKind.MODEL_RATE_LIMIT), (499, ErrorKind.MODEL_BAD_REQUEST),
    (500, ErrorKind.MODEL_SERVER_ERROR), (502, ErrorKind.MODEL_SERVER_ERROR), (503, ErrorKind.MODEL_SERVER_ERROR),
    (504, ErrorKind.MODEL_SERVER_ERROR), (529, ErrorKind.MODEL_SERVER_ERROR), (599, ErrorKind.MODEL_SERVER_ERROR),
]

#: where HTTP statuses are compared that are not a model endpoint's answer to us.
NOT_MODEL_STATUSES = {
    "models/scripted/": "the fake endpoint picks the error body of a status it sends",
    "environments/docker/": "the Docker daemon's and the image registries' statuses, with their own kinds",
}
MODEL_KINDS = [k for k in ErrorKind if k.value.startswith("model_")]


@pytest.mark.parametrize(("status", "kind"), STATUS_KINDS)
def test_each_status_has_its_kind(status: int, kind: ErrorKind) -> None:
    assert model_error_kind(status) is kind


def test_transient_statuses_are_429_and_5xx() -> None:
    transient = {s for s, _ in STATUS_KINDS if s >= 400 and model_error_kind(s) in TRANSIENT_MODEL_KINDS}
    assert transient == {429, 500, 502, 503, 504, 529, 599}


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_the_retry_policy_the_limiter_and_the_engine_agree_on_what_is_transient(kind: ErrorKind) -> None:
    transient = kind in TRANSIENT_MODEL_KINDS
    assert RetryPolicy().allows(kind, 1, 0) is transient
    assert policy(kind).retry is transient
    assert outcome_of(kind) != "ok"
    limiter = AdaptiveLimiter("e", 8, initial=4)
    limiter.release(limiter._grant(), outcome_of(kind))
    # only a transient kind (the rate limit) may tell the limiter to back off
    assert limiter.limit == 4 or transient


def test_transient_model_kinds_are_model_kinds() -> None:
    assert TRANSIENT_MODEL_KINDS < set(MODEL_KINDS)
    assert not {ErrorKind.MODEL_AUTH, ErrorKind.MODEL_BAD_REQUEST} & TRANSIENT_MODEL_KINDS


def _statuses(node: ast.AST) -> list[int]:
    """The error statuses (401-599) a node names: an int, or the ints of a tuple, list or set."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and type(n.value) is int and 401 <= n.value <= 599]


_TRANSIENT_NAMES = {k.name for k in TRANSIENT_MODEL_KINDS}


def status_copies(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each comparison with an error status and each hand-made list of transient model kinds."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            codes = [c for side in (node.left, *node.comparators) for c in _statuses(side)]
            if codes:
                found.append((node.lineno, f"compares a status with {codes}"))
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            named = {e.attr for e in node.elts if isinstance(e, ast.Attribute)} & _TRANSIENT_NAMES
            if len(named) >= 2:
                found.append((node.lineno, f"lists transient model kinds {sorted(named)}"))
    return sorted(found)


def test_no_other_module_classifies_model_statuses_or_lists_transient_kinds() -> None:
    """``common/http_status.py`` is the one place: a copy elsewhere drifts from it (as the gateway's did)."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "common/http_status.py" or rel.startswith(tuple(NOT_MODEL_STATUSES)):
            continue
        for line, what in status_copies(ast.parse(path.read_text(encoding="utf-8"))):
            bad.append(f"{rel}:{line}: {what}")
    assert not bad, "use agentcompass.common.http_status:\n" + "\n".join(bad)


def test_the_scan_finds_a_copy() -> None:
    src = (
        "if resp.status_code == 429: pass\n"
        "kind = SERVER if status >= 500 else OTHER\n"
        "if status in (401, 403): pass\n"
        "if 500 <= code: pass\n"
        "RETRYABLE = frozenset({ErrorKind.MODEL_RATE_LIMIT, ErrorKind.MODEL_SERVER_ERROR})\n"
        "if resp.status_code < 400: pass\n"  # success or not: not a classification
        "if exit_code in (126, 127): pass\n"
    )
    assert [line for line, _ in status_copies(ast.parse(src))] == [1, 2, 3, 4, 5]
