"""The built-in ``scripted`` model: deterministic replies from JSON scripts, for hermetic tests.

A script is a JSON list of entries ``{"match": "<substring of the FIRST user message>", "turns": [...]}``.
The reply is ``turns[i]`` where ``i`` is the number of assistant messages already in the conversation
(the last turn repeats once the script runs out). An entry may also name ``system`` (a substring of the system
text before the first user message) and ``tool`` (a tool the request offers): such an entry answers only that
harness's conversations (the bundled scripts list theirs before the generic ones). A turn is the reply text, or
an object
``{"content": "...", "reasoning": "...", "tool_calls": [{"name": "bash", "arguments": {"cmd": "ls"}}]}``
(every key optional; ``arguments`` an object or a JSON string) for a reply that carries reasoning and/or
calls tools; each protocol of the scripted server renders it in its native shape, and the tool-call ids
are ``call_<turn>_<i>``. The first matching entry wins, searched in this order:
model param ``script`` (inline entries), ``script_file`` (a path or a list of paths), then every
``*.json`` in ``agentcompass/models/scripted/scripts/`` (unless ``bundled: false``). No match -> ``fallback``.

Model params (anything else, e.g. ``temperature``, is accepted and ignored so one request can switch
between a real and the scripted model; a near-miss such as ``script_fle`` is refused): ``script``,
``script_file``, ``bundled`` (bool, default true),
``fallback`` (str), ``echo`` (bool: reply with the last user message), ``latency_s`` (float: simulated
model latency per call).
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import msgspec

from ..._errors import ConfigError
from ..._validate import MAX_SECONDS
from ...interfaces import ModelResponse
from ...params import as_params
from ...records import ToolCall, Usage

DEFAULT_FALLBACK = "I could not solve this task.\n<submit></submit>"
BUNDLED_SCRIPTS_DIR = Path(__file__).resolve().parent / "scripts"
_MATCH_CACHE_SIZE = 4096


class ScriptToolCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A tool call in a scripted turn: the function name and its arguments (an object or a JSON string)."""

    name: str
    arguments: dict[str, Any] | str = {}


class ScriptTurn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A scripted turn richer than plain text: optional reasoning and tool calls."""

    content: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ScriptToolCall, ...] = ()


class ScriptEntry(msgspec.Struct, frozen=True):
    """One script entry. Unknown keys (comments, ids) are ignored. ``system`` (a substring of the system text)
    and ``tool`` (the name of a tool the request offers) narrow it to one harness's conversations."""

    match: str
    turns: Annotated[tuple[str | ScriptTurn, ...], msgspec.Meta(min_length=1)]
    system: str | None = None
    tool: str | None = None

    @property
    def narrowed(self) -> bool:
        """Whether it answers only one harness's conversations (it names ``system`` or ``tool``)."""
        return self.system is not None or self.tool is not None

    def fits(self, first_user: str, system: str, tools: frozenset[str]) -> bool:
        """Whether this entry answers a conversation with this first user message, system text and tools."""
        return (self.match in first_user and (self.system is None or self.system in system)
                and (self.tool is None or self.tool in tools))


class ScriptedToolCall(msgspec.Struct, frozen=True):
    """A tool call of a reply: id ``call_<turn>_<i>``, name, and the arguments as a JSON string."""

    id: str
    name: str
    arguments: str


class ScriptedReply(msgspec.Struct, frozen=True):
    """What the policy answers to one conversation; ``turn`` is the number of earlier assistant turns."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    reasoning: str | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    turn: int = 0


def message_text(message: Any) -> str:
    """The text of an OpenAI chat message (string content or a list of ``text`` parts)."""
    if not isinstance(message, Mapping):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _decode_entries(data: Any, where: str, field: str) -> tuple[ScriptEntry, ...]:
    try:
        if isinstance(data, bytes | str):
            entries = msgspec.json.decode(data, type=list[ScriptEntry])
        else:
            entries = msgspec.convert(data, list[ScriptEntry])
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ConfigError(
            f"Invalid scripted-model script in {where}: {exc}. Expected a JSON list of "
            '{"match": "<substring of the first user message>", "turns": ["reply 1", ...]} entries; a turn is '
            'a string or {"content": ..., "reasoning": ..., "tool_calls": [{"name": ..., "arguments": {...}}]}.',
            field=field) from None
    return tuple(entries)


@functools.lru_cache(maxsize=256)
def _load_file_cached(path: str, mtime_ns: int, size: int, field: str) -> tuple[ScriptEntry, ...]:
    # keyed on mtime/size so an edited file is re-read; entries are immutable, so sharing is safe
    return _decode_entries(Path(path).read_bytes(), path, field)


def load_script_file(path: str | Path, *, field: str = "script_file") -> tuple[ScriptEntry, ...]:
    """Read and validate one JSON script file (cached until the file changes)."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except OSError as exc:
        raise ConfigError(f"Scripted-model {field} {str(path)!r} cannot be read: {exc.strerror}.",
                          field=field) from None
    if not p.is_file():
        raise ConfigError(f"Scripted-model {field} {str(path)!r} is not a file.", field=field)
    return _load_file_cached(str(p.resolve()), st.st_mtime_ns, st.st_size, field)


def bundled_entries(directory: Path = BUNDLED_SCRIPTS_DIR) -> tuple[ScriptEntry, ...]:
    """Entries of every ``*.json`` script in the package's scripts folder, in file-name order, those narrowed to
    a harness (``system`` / ``tool``) first: a harness's own script beats the generic one for the same task."""
    if not directory.is_dir():
        return ()
    out: list[ScriptEntry] = []
    for f in sorted(directory.glob("*.json")):
        out.extend(load_script_file(f, field="bundled"))
    return (*(e for e in out if e.narrowed), *(e for e in out if not e.narrowed))


def _make_matcher(entries: tuple[ScriptEntry, ...]) -> Callable[[str, str, frozenset[str]], ScriptEntry | None]:
    # drop later duplicates: they can never win
    seen: set[tuple[str, str | None, str | None]] = set()
    ordered: list[ScriptEntry] = []
    for e in entries:
        key = (e.match, e.system, e.tool)
        if key not in seen:
            seen.add(key)
            ordered.append(e)
    frozen = tuple(ordered)

    # a conversation keeps the same first user message, system text and tools on every turn, so the scan runs
    # once per task
    @functools.lru_cache(maxsize=_MATCH_CACHE_SIZE)
    def find(text: str, system: str, tools: frozenset[str]) -> ScriptEntry | None:
        for e in frozen:
            if e.fits(text, system, tools):
                return e
        return None

    return find


class ScriptedParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The params the scripted model reads (see the module doc); the request's other model params are not its."""

    script: Annotated[list[Any], msgspec.Meta(
        description='a list of {"match": ..., "turns": [...]} entries')] | None = None
    script_file: str | list[str] | None = None
    bundled: bool = True
    fallback: str = DEFAULT_FALLBACK
    echo: bool = False
    latency_s: Annotated[float, msgspec.Meta(ge=0, le=MAX_SECONDS)] = 0.0


#: the params the scripted model reads (others, e.g. ``temperature``, are ignored).
SCRIPTED_PARAMS: tuple[str, ...] = ScriptedParams.__struct_fields__


def scripted_params(params: Mapping[str, Any] | ScriptedParams | None) -> ScriptedParams:
    """The scripted model's own params out of a request's model params: the others are ignored (one request can
    switch between a real and the scripted model), a near-miss of a known name is refused."""
    if isinstance(params, ScriptedParams):
        return params
    params = dict(params or {})
    _refuse_near_misses(params)
    own = {k: v for k, v in params.items() if k in SCRIPTED_PARAMS}
    # the error names the bare key (``script``), as the scripted model's own errors always have
    return as_params(ScriptedParams, own, "model scripted", field_prefix="")


def _refuse_near_misses(params: Mapping[str, Any]) -> None:
    """Other params are ignored on purpose, but a misspelt scripted param (``script_fle``) would silently run the
    bundled script instead of the user's: refuse keys that are one typo away from a known one."""
    for key in params:
        if key in SCRIPTED_PARAMS:
            continue
        close = difflib.get_close_matches(key, SCRIPTED_PARAMS, n=1, cutoff=0.8)
        if close:
            raise ConfigError(f"Unknown scripted-model param `{key}`: did you mean `{close[0]}`? The scripted "
                              f"model reads {', '.join(SCRIPTED_PARAMS)} and ignores other params.", field=key)


class ScriptedPolicy:
    """Decides the assistant reply from the conversation, deterministically. Scripts load once here."""

    def __init__(self, params: Mapping[str, Any] | ScriptedParams | None = None) -> None:
        p = scripted_params(params)
        self.echo = p.echo
        self.fallback = p.fallback
        self.latency_s = p.latency_s

        entries: list[ScriptEntry] = []
        if p.script is not None:
            entries.extend(_decode_entries(p.script, "param `script`", "script"))
        files = [p.script_file] if isinstance(p.script_file, str) else p.script_file or []
        for f in files:
            entries.extend(load_script_file(f))
        if p.bundled:
            entries.extend(bundled_entries())
        self.entries: tuple[ScriptEntry, ...] = tuple(entries)
        self._find = _make_matcher(self.entries)

    def match(self, first_user_message: str, system: str = "",
              tools: frozenset[str] = frozenset()) -> ScriptEntry | None:
        """The first entry that fits the first user message, the system text and the offered tools' names."""
        return self._find(first_user_message, system, tools)

    def reply_text(self, messages: Sequence[Any]) -> str:
        """The assistant reply to ``messages``."""
        return self.respond(messages).content

    def respond(self, messages: Sequence[Any], tools: frozenset[str] = frozenset()) -> ScriptedReply:
        """The reply with its token counts (chars // 4, at least 1). One pass over the messages.

        ``messages`` are OpenAI chat messages; an assistant message (with or without tool calls) is one turn;
        ``tools``: the names of the tools the request offers.
        """
        first_user: str | None = None
        last_user = ""
        system: list[str] = []
        assistants = 0
        chars = 0
        for m in messages:
            if not isinstance(m, dict) and not isinstance(m, Mapping):
                continue
            content = m.get("content")
            text = content if isinstance(content, str) else message_text(m)
            chars += len(text)
            role = m.get("role")
            if role == "assistant":
                assistants += 1
            elif role == "user":
                last_user = text
                if first_user is None:
                    first_user = text
            elif role in ("system", "developer") and first_user is None:
                system.append(text)
        turn: str | ScriptTurn
        if self.echo:
            turn = last_user
        else:
            entry = self._find(first_user, "\n".join(system), tools) if first_user is not None else None
            if entry is None:
                turn = self.fallback
            else:
                turns = entry.turns
                turn = turns[assistants] if assistants < len(turns) else turns[-1]
        if isinstance(turn, str):
            return ScriptedReply(turn, max(1, chars // 4), max(1, len(turn) // 4), turn=assistants)
        calls = tuple(ScriptedToolCall(f"call_{assistants}_{i}", c.name, c.arguments if isinstance(c.arguments, str)
                                       else msgspec.json.encode(c.arguments).decode())
                      for i, c in enumerate(turn.tool_calls))
        out_chars = len(turn.content) + len(turn.reasoning or "") + sum(len(c.name) + len(c.arguments) for c in calls)
        return ScriptedReply(turn.content, max(1, chars // 4), max(1, out_chars // 4), reasoning=turn.reasoning,
                             tool_calls=calls, turn=assistants)


def tool_names(tools: Sequence[Any] | None) -> frozenset[str]:
    """The names of the tools a request offers, in any of the three protocols' shapes."""
    names: set[str] = set()
    for t in tools or ():
        if isinstance(t, Mapping):
            fn = t.get("function")
            name = fn.get("name") if isinstance(fn, Mapping) else t.get("name")
            if isinstance(name, str):
                names.add(name)
    return frozenset(names)


class ScriptedClient:
    """The scripted model in-process: a ``ModelClient`` with zero I/O."""

    def __init__(self, params: Mapping[str, Any] | ScriptedParams | None = None, *,
                 model_id: str = "scripted") -> None:
        self.model_id = model_id
        self.policy = ScriptedPolicy(params)
        self.calls = 0

    async def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                       **params: Any) -> ModelResponse:
        """Answer from the script; ``tools`` and per-call params are ignored."""
        start = time.perf_counter()
        if self.policy.latency_s:
            await asyncio.sleep(self.policy.latency_s)
        r = self.policy.respond(messages, tool_names(tools))
        self.calls += 1
        usage = Usage(prompt_tokens=r.prompt_tokens, completion_tokens=r.completion_tokens,
                      total_tokens=r.prompt_tokens + r.completion_tokens, calls=1)
        calls = [ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in r.tool_calls]
        return ModelResponse(content=r.content or (None if calls else ""), reasoning=r.reasoning,
                             tool_calls=calls, finish_reason="tool_calls" if calls else "stop", usage=usage,
                             latency_s=time.perf_counter() - start)

    async def aclose(self) -> None:
        """Nothing to release."""
