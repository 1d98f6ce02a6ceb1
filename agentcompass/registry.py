"""Lazy registries of components, one set per engine instance.

A name maps to ``"module:Class"``; the class is imported only when first used. Ids that are not registered
names and contain ``:`` or a dot are taken as import paths; whatever an id resolves to must be a class.
A component class declares its params as a msgspec ``Params`` struct; ``Registry.convert_params`` converts a
request's dict to it (see ``params``). Third parties add components through entry points
(``ENTRY_POINT_GROUPS``) or ``recipe_dirs`` (python files defining ``register(registries)``).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import types
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

from ._errors import ConfigError, did_you_mean
from .params import convert_params

Kind = Literal["benchmark", "harness", "environment", "recipe", "analyzer"]
KINDS: tuple[Kind, ...] = ("benchmark", "harness", "environment", "recipe", "analyzer")
#: each kind's plural, for messages listing the known names.
PLURALS: dict[Kind, str] = {"benchmark": "benchmarks", "harness": "harnesses", "environment": "environments",
                            "recipe": "recipes", "analyzer": "analyzers"}
#: entry point group of each kind.
ENTRY_POINT_GROUPS: dict[Kind, str] = {
    "benchmark": "agentcompass.benchmarks", "harness": "agentcompass.harnesses",
    "environment": "agentcompass.environments", "recipe": "agentcompass.recipes",
    "analyzer": "agentcompass.analyzers",
}

BUILTINS: dict[Kind, dict[str, str]] = {
    "benchmark": {
        "shell_tasks": "agentcompass.benchmarks.shell_tasks.benchmark:ShellTasks",
        "humaneval": "agentcompass.benchmarks.humaneval.benchmark:HumanEval",
        "agentdojo": "agentcompass.benchmarks.agentdojo.benchmark:AgentDojo",
        "swebench": "agentcompass.benchmarks.swebench.benchmark:SWEBench",
        "swebench_verified": "agentcompass.benchmarks.swebench.benchmark:SWEBenchVerified",
        "swebench_lite": "agentcompass.benchmarks.swebench.benchmark:SWEBenchLite",
        "swebench_jsonl": "agentcompass.benchmarks.swebench.benchmark:SWEBenchJsonl",
        "swebench_local": "agentcompass.benchmarks.swebench.benchmark:SWEBenchLocal",
        "swebench_multilingual": "agentcompass.benchmarks.swebench.multilingual:SWEBenchMultilingual",
        "swebench_pro": "agentcompass.benchmarks.swebench.pro:SWEBenchPro",
        "task_dir": "agentcompass.benchmarks.task_dir.benchmark:TaskDir",
        "task_dir_local": "agentcompass.benchmarks.task_dir.benchmark:BundledTaskDir",
        "terminal_bench": "agentcompass.benchmarks.task_dir.benchmark:TerminalBench",
        "skillsbench": "agentcompass.benchmarks.task_dir.benchmark:SkillsBench",
        "qa_local": "agentcompass.benchmarks.qa.local:QALocal",
        "hle": "agentcompass.benchmarks.qa.hle:HLE",
        "browsecomp": "agentcompass.benchmarks.qa.browsecomp:BrowseComp",
        "simpleqa": "agentcompass.benchmarks.qa.simpleqa:SimpleQA",
        "sealqa": "agentcompass.benchmarks.qa.sealqa:SealQA",
        "frontierscience": "agentcompass.benchmarks.qa.frontierscience:FrontierScience",
        "gpqa_diamond": "agentcompass.benchmarks.qa.gpqa_diamond:GPQADiamond",
        "bfcl": "agentcompass.benchmarks.bfcl.benchmark:BFCL",
        "tau2": "agentcompass.benchmarks.tau2.benchmark:Tau2",
    },
    "harness": {
        "none": "agentcompass.harnesses.none:NoneHarness",
        "openai_chat": "agentcompass.harnesses.openai_chat:OpenAIChatHarness",
        "shell_agent": "agentcompass.harnesses.shell_agent:ShellAgent",
        "mini_swe_agent": "agentcompass.harnesses.mini_swe_agent.harness:MiniSweAgent",
        "terminus": "agentcompass.harnesses.terminus.harness:Terminus",
        "openhands": "agentcompass.harnesses.openhands.harness:OpenHands",
        "oracle": "agentcompass.harnesses.oracle:Oracle",
        "predictions": "agentcompass.harnesses.predictions:Predictions",
        "recorded": "agentcompass.harnesses.recorded:Recorded",
        "claude_code": "agentcompass.harnesses.installed.claude_code:ClaudeCode",
        "codex": "agentcompass.harnesses.installed.codex:Codex",
        "tool_agent": "agentcompass.harnesses.tool_agent:ToolAgent",
    },
    "environment": {
        "local": "agentcompass.environments.local.provider:LocalProvider",
        "docker": "agentcompass.environments.docker.provider:DockerProvider",
        "ray_docker": "agentcompass.environments.ray.provider:RayDockerProvider",
    },
    "recipe": {},
    "analyzer": {
        "reward_hacking": "agentcompass.analyzers.reward_hacking:RewardHacking",
        "repeated_tool_calls": "agentcompass.analyzers.repetition:RepeatedToolCalls",
        "repetitive_output": "agentcompass.analyzers.repetition:RepetitiveOutput",
        "empty_output": "agentcompass.analyzers.output_checks:EmptyOutput",
        "truncated": "agentcompass.analyzers.output_checks:Truncation",
        "mixed_language": "agentcompass.analyzers.output_checks:MixedLanguage",
    },
}


#: the base class each kind's components subclass (the engine calls their hooks directly).
BASES: dict[Kind, str] = {
    "benchmark": "agentcompass.benchmarks.base:Benchmark",
    "harness": "agentcompass.harnesses.base:Harness",
    "environment": "agentcompass.environments.base:EnvironmentProvider",
}


def import_object(path: str) -> Any:
    """Import ``module:attr`` or ``module.attr``."""
    if ":" in path:
        mod_name, _, attr = path.partition(":")
    else:
        mod_name, _, attr = path.rpartition(".")
    if not mod_name or not attr:
        raise ImportError(f"not an import path: {path!r}")
    obj: Any = importlib.import_module(mod_name)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            if ":" in path or not isinstance(obj, types.ModuleType):
                raise
            # ``package.module``: a submodule nobody imported yet is not an attribute of its package
            obj = importlib.import_module(f"{obj.__name__}.{part}")
    return obj


class Registry:
    """Components of one kind: name -> import path or object, resolved lazily."""

    def __init__(self, kind: Kind, entries: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, Any] = dict(entries or {})
        self._loaded: dict[str, Any] = {}

    def register(self, name: str, target: Any) -> None:
        """Add or replace ``name`` (target: ``"module:Class"`` or the class itself)."""
        self._entries[name] = target
        self._loaded.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def resolve(self, name: str, *, field: str | None = None) -> Any:
        """The class for ``name``; a clear ConfigError for unknown ids, import failures and non-classes."""
        field = field or self.kind
        if name in self._loaded:
            return self._loaded[name]
        target = self._entries.get(name)
        if target is None and not (":" in name or "." in name):
            raise self._unknown(name, field)
        if target is None or isinstance(target, str):
            path = name if target is None else target
            try:
                obj = import_object(path)
            except Exception as exc:
                if target is None and _not_a_module(path, exc):
                    # an id with a dot is more often a mistyped name than a path: list the known names too
                    raise self._unknown(name, field, tried=f"{type(exc).__name__}: {exc}") from None
                source = "" if target is None else f" from {path!r}"
                raise ConfigError(
                    f"Cannot load {self.kind} {name!r} (field `{field}`){source}: {exc}.", field=field
                ) from None
        else:
            obj = target
        if not isinstance(obj, type):
            where = repr(name) if target is None else f"{name!r} (registered as {_label(target)})"
            raise ConfigError(
                f"Cannot use {self.kind} {where} (field `{field}`): {_label(target or name)} is "
                f"{_describe(obj)}, not a class. A {self.kind} must be a class, given as `module:Class`.",
                field=field,
            )
        self._check_contract(obj, name, target, field)
        self._loaded[name] = obj
        return obj

    def convert_params(self, cls: type, params: Any, name: str) -> Any:
        """``params`` (the user's dict) converted once to ``cls``'s declared ``Params`` struct, with a ConfigError
        naming ``<kind>.params.<key>`` and what is allowed; the dict as given for a class that declares none."""
        return convert_params(cls, params, f"{self.kind} {name}")
    def _check_contract(self, cls: type, name: str, target: Any, field: str) -> None:
        """A ConfigError unless ``cls`` subclasses its kind's base and implements every required method."""
        base_path = BASES.get(self.kind)
        if base_path is None:
            return
        base = import_object(base_path)
        where = repr(name) if target is None else f"{name!r} (registered as {_label(target)})"
        public = f"agentcompass.interfaces.{base.__name__}"
        if not issubclass(cls, base):
            raise ConfigError(
                f"Cannot use {self.kind} {where} (field `{field}`): {cls.__qualname__} does not subclass "
                f"`{public}`. A {self.kind} subclasses it and implements its required methods.", field=field)
        missing = sorted(getattr(cls, "__abstractmethods__", ()))
        if missing:
            raise ConfigError(
                f"Cannot use {self.kind} {where} (field `{field}`): {cls.__qualname__} does not implement "
                f"{', '.join(f'`{m}`' for m in missing)}, required by `{public}`.", field=field)

    def _unknown(self, name: str, field: str, *, tried: str | None = None) -> ConfigError:
        known = self.names()
        hint = did_you_mean(name, known)
        if tried is None:
            how = " A `module:Class` import path is also accepted."
            lead = ""
        else:
            how = ""
            lead = f" It is not a registered name, and importing it as an import path failed ({tried})."
        return ConfigError(
            f"Unknown {self.kind} id {name!r} in field `{field}`.{lead} Known {PLURALS[self.kind]}: "
            f"{', '.join(known) or '(none)'}.{hint}{how}",
            field=field,
        )


def _not_a_module(path: str, exc: Exception) -> bool:
    """Whether importing ``path`` failed because its module does not exist (or it is no import path at all),
    as opposed to an existing module that is broken or lacks the attribute."""
    mod_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    if not mod_name or not attr or mod_name.startswith("."):
        return True  # malformed: an empty part, or a relative import
    if isinstance(exc, ModuleNotFoundError):
        missing = exc.name or ""
        return mod_name == missing or mod_name.startswith(missing + ".")
    return False


def _label(target: Any) -> str:
    if isinstance(target, str):
        return target
    return repr(getattr(target, "__qualname__", None) or target)


def _describe(obj: Any) -> str:
    """What ``obj`` is, for an error message: "a module", "a function", "a str"."""
    if inspect.ismodule(obj):
        return "a module"
    if inspect.isroutine(obj):
        return "a function"
    return f"a {type(obj).__name__}"


class Registries:
    """All registries of one engine: seeded from the built-ins, entry points and recipe dirs."""

    def __init__(self, recipe_dirs: Iterable[str] = (), *, use_entry_points: bool = True) -> None:
        self.by_kind: dict[Kind, Registry] = {k: Registry(k, BUILTINS[k]) for k in KINDS}
        if use_entry_points:
            self._load_entry_points()
        for d in recipe_dirs:
            self.load_recipe_dir(d)

    def __getitem__(self, kind: Kind) -> Registry:
        return self.by_kind[kind]

    def _load_entry_points(self) -> None:
        for kind in KINDS:
            for ep in entry_points(group=ENTRY_POINT_GROUPS[kind]):
                self.by_kind[kind].register(ep.name, ep.value)

    def load_recipe_dir(self, directory: str) -> None:
        """Import every ``*.py`` in a trusted directory and call its ``register(registries)``."""
        path = Path(directory)
        if not path.is_dir():
            raise ConfigError(f"recipe_dirs entry {directory!r} is not a directory.", field="recipe_dirs")
        for file in sorted(path.glob("*.py")):
            mod_name = f"agentcompass_recipe_{abs(hash(str(file.resolve())))}_{file.stem}"
            spec = importlib.util.spec_from_file_location(mod_name, file)
            if spec is None or spec.loader is None:
                continue
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                raise ConfigError(f"recipe file {str(file)!r} failed to import: {exc!r}",
                                  field="recipe_dirs") from None
            register = getattr(module, "register", None)
            if callable(register):
                register(self)
