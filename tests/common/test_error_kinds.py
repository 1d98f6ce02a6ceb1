"""Error kinds are one declared type: every kind has a policy, an undeclared one fails where it is made, the
package names kinds only through ``ErrorKind``, and records keep the same strings on disk."""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec
import pytest

from agentcompass._errors import EvalError, ModelError
from agentcompass.benchmarks.qa.judge import JudgeError
from agentcompass.common.error_kinds import ErrorKind
from agentcompass.engine.failures import POLICIES, kind_of, policy, stored_policy
from agentcompass.records import AttemptRecord, TaskDetail

PACKAGE = Path(__file__).resolve().parents[2] / "agentcompass"

#: the strings records held before kinds were declared: a run written then must still load and be reused.
KINDS_ON_DISK = {
    "model_rate_limit", "model_server_error", "model_connection_error", "model_bad_response", "model_auth",
    "model_bad_request", "model_response_too_large", "model_error", "env_open_failed", "env_lost", "disk_full",
    "registry_unreachable", "image_pull_stalled", "image_pull_timeout", "image_wait_timeout", "image_not_found",
    "registry_auth_required", "image_pull_failed", "command_timeout", "agent_timeout", "step_limit", "cost_limit",
    "format_error_limit", "agent_error", "agent_transcript_invalid", "transcript_limit", "agent_unavailable",
    "agent_stuck", "agent_exit", "harness_crash", "prepare_error", "setup_error", "setup_timeout", "eval_error",
    "eval_timeout", "judge_unparsable", "judge_timeout", "judge_auth", "judge_unavailable", "stalled", "cancelled",
    "run_timeout", "engine_error", "token_limit", "message_limit", "working_limit",
}


def test_every_kind_has_a_policy_and_keeps_its_string() -> None:
    assert set(POLICIES) == set(ErrorKind)
    assert {k.value for k in ErrorKind} == KINDS_ON_DISK
    assert all(k == k.value and str(k) == k.value for k in ErrorKind)


def test_policies_are_unchanged() -> None:
    assert policy(None) == (False, True, True)
    assert policy("env_lost").retry and policy(ErrorKind.MODEL_RATE_LIMIT).retry
    assert policy("agent_timeout") == (False, True, True)
    # kinds that were produced but never declared keep the policy they silently got: none of the three
    assert policy("model_error") == policy("agent_stuck") == policy("agent_exit") == (False, False, False)


@pytest.mark.parametrize("typo", ["model_rate_limt", "env-lost", "", "ENV_LOST"])
def test_an_undeclared_kind_fails_where_it_is_made(typo: str) -> None:
    with pytest.raises(ValueError, match="unknown error kind"):
        policy(typo)
    with pytest.raises(ValueError, match="unknown error kind"):
        ModelError("x", kind=typo)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown error kind"):
        EvalError("x", kind=typo)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown error kind"):
        JudgeError("x", {}, typo)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown error kind"):
        kind_of(RuntimeError("x"), typo)  # type: ignore[arg-type]


def test_the_error_defaults_are_declared_kinds() -> None:
    assert ModelError("x").kind is ErrorKind.MODEL_ERROR
    assert EvalError("x").kind is ErrorKind.EVAL_ERROR
    assert ModelError("x", kind="model_auth").kind is ErrorKind.MODEL_AUTH  # type: ignore[arg-type]
    assert kind_of(AttributeError("x"), ErrorKind.EVAL_ERROR) is ErrorKind.ENGINE_ERROR


def test_records_hold_the_plain_string_and_old_records_still_load() -> None:
    encoded = msgspec.json.encode(AttemptRecord(status="run_error", error_kind=ErrorKind.ENV_LOST))
    assert b'"error_kind":"env_lost"' in encoded
    old = b'{"task_id":"t","k":2,"identity":"i","attempts":{"1":{"status":"completed","error_kind":"agent_timeout"},' \
          b'"2":{"status":"run_error","error_kind":"some_kind_of_2025"}}}'
    detail = msgspec.json.decode(old, type=TaskDetail)
    assert detail.attempts["1"].error_kind == ErrorKind.AGENT_TIMEOUT
    assert stored_policy(detail.attempts["1"].error_kind).valid  # reused as before
    # a kind this version does not declare is read, and not reused (what it got before), not an exception
    assert stored_policy(detail.attempts["2"].error_kind) == (False, False, False)


#: calls whose positional argument at this index is a failure kind.
_KIND_ARG = {"_Failure": 1, "kind_of": 1, "JudgeError": 2, "stream_error": 0}


def _name(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _bare_kinds(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, literal) of each string literal used as an error kind: any literal given as ``error_kind`` or to
    an error's ``kind``; a declared kind's string given as any other ``kind`` (a name many things use)."""
    found: list[tuple[int, str]] = []

    def literal(node: ast.AST | None, any_string: bool) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if any_string or node.value in KINDS_ON_DISK:
                found.append((node.lineno, node.value))
        elif isinstance(node, ast.IfExp):
            literal(node.body, any_string)
            literal(node.orelse, any_string)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = _name(node.func)
            is_error = callee.endswith(("Error", "Error_", "Failure", "Failed"))
            for kw in node.keywords:
                if kw.arg in ("error_kind", "kind"):
                    literal(kw.value, kw.arg == "error_kind" or is_error)
            if callee in _KIND_ARG and len(node.args) > _KIND_ARG[callee]:
                literal(node.args[_KIND_ARG[callee]], True)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                for t, v in zip(names, values, strict=False):
                    if _name(t) in ("error_kind", "kind"):
                        literal(v, _name(t) == "error_kind")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = {_name(s) for s in sides}
            if named & {"error_kind", "kind"}:
                for s in sides:
                    literal(s, "error_kind" in named)
    return sorted(found)


def test_the_package_names_kinds_only_through_error_kind() -> None:
    """No bare string where a kind is made or compared: a typo there used to get the no-retry default."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, value in _bare_kinds(ast.parse(path.read_text(encoding="utf-8"))):
            why = "use ErrorKind" if value in KINDS_ON_DISK else "not an ErrorKind"
            bad.append(f"{path.relative_to(PACKAGE)}:{line}: {value!r} ({why})")
    assert not bad, "error kinds given as bare strings:\n" + "\n".join(bad)


def test_the_scan_finds_a_bare_kind() -> None:
    src = (
        'raise ModelError("x", kind="model_auht")\n'
        'r.error_kind = "agnet_timeout"\n'
        'kind = "a" if x else "judge_auth"\n'
        'if exc.kind == "model_auth": pass\n'
        'raise _Failure("run_error", "stalled", e)\n'
        'if a.error_kind == "typo": pass\n'
        'Registry(kind="benchmark")\n'  # not an error's kind: left alone
        'if node.kind == "shell": pass\n'
    )
    assert _bare_kinds(ast.parse(src)) == [(1, "model_auht"), (2, "agnet_timeout"), (3, "judge_auth"),
                                           (4, "model_auth"), (5, "stalled"), (6, "typo")]
