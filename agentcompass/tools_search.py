"""Web search and page fetching for research agents: a pluggable ``SearchProvider`` and the tool session that
offers ``web_search`` (and ``fetch_url``) to the ``tool_agent`` harness.

Providers speak a real search API over httpx:

- ``brave``: the Brave Search API (``GET {base_url}/res/v1/web/search?q=...&count=N``, the key in the
  ``X-Subscription-Token`` header; results in ``web.results[].{title,url,description}``);
- ``searxng``: a SearXNG instance's JSON API (``GET {base_url}/search?q=...&format=json``; results in
  ``results[].{title,url,content}``), no key.

The key is a secret: the benchmark returns it from ``Benchmark.secrets()``. A provider error (HTTP status, time
out, a body that is not the API's JSON) goes back to the model as the tool's error, never ends the attempt.
``fetch_url`` fetches http(s) pages (size-bounded, HTML reduced to text) and refuses every address that is not
globally routable (``ipaddress``'s ``is_global``: loopback, private, link-local, shared 100.64/10, reserved; an
IPv4-mapped, 6to4 or NAT64 IPv6 address is judged by the IPv4 address it carries) unless
``allow_private_hosts``: the session runs on the engine's host, and an agent must not reach its services. Each
hop's name is resolved once and the connection goes to the checked address (the URL's host stays in ``Host`` and
TLS SNI), so a name that resolves differently the second time (DNS rebinding) cannot slip through. Every tool call
(a search, a fetch with its redirects) is bounded as a whole by ``timeout_s``.
"""

from __future__ import annotations

import abc
import asyncio
import html
import ipaddress
import re
import socket
import time
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx
import msgspec

from ._errors import ConfigError
from ._validate import Count, Seconds
from .models.endpoint import key_of
from .tool_json import MAX_DEPTH, nesting_depth
from .tools import ToolError, ToolSession

SearchProviderName = Literal["brave", "searxng"]
ToolName = Literal["web_search", "fetch_url"]
DEFAULT_BASE_URLS: dict[str, str] = {"brave": "https://api.search.brave.com"}
#: bytes of a search API's answer read at most
_MAX_SEARCH_BYTES = 4 << 20
_SNIPPET_CHARS = 500
#: characters of one result field reduced to text at most (a field can be megabytes of markup)
_FIELD_SOURCE_CHARS = 20_000
_URL_CHARS = 2048


class SearchSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True, omit_defaults=True):
    """The search tool's settings (benchmark param ``search``): ``provider`` (``brave`` or ``searxng``),
    ``base_url`` (the API's root; Brave's public one by default), ``api_key`` (a secret) or ``api_key_env`` (the
    environment variable holding it), ``max_results`` per
    query (1-50, default 5), ``timeout_s`` per tool call, redirects and the whole body included (default 20),
    ``fetch_max_bytes`` of one fetched page (default 2 MB), ``allow_private_hosts`` (let ``fetch_url`` reach
    loopback/private addresses; default false)."""

    provider: SearchProviderName = "brave"
    base_url: Annotated[str, msgspec.Meta(pattern=r"^https?://\S+$")] | None = None
    api_key: str | None = None
    api_key_env: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    max_results: Annotated[int, msgspec.Meta(ge=1, le=50)] = 5
    timeout_s: Seconds = 20.0
    fetch_max_bytes: Count = 2_000_000
    allow_private_hosts: bool = False

    def key(self) -> str | None:
        """``api_key``, else the value of the environment variable ``api_key_env``."""
        return key_of(self.api_key, self.api_key_env, "benchmark.params.search.api_key_env")

    def secrets(self) -> tuple[str, ...]:
        """The strings to mask everywhere (the key)."""
        key = self.key()
        return (key,) if key else ()

    def check(self, *, needs_api: bool = True) -> None:
        """ConfigError now for what the first tool call would refuse (an unset ``api_key_env``; with
        ``needs_api``, no ``base_url`` where the provider has no default)."""
        if needs_api and not (self.base_url or DEFAULT_BASE_URLS.get(self.provider)):
            raise ConfigError(f"search provider {self.provider} needs base_url",
                              field="benchmark.params.search.base_url")
        self.key()


class SearchHit(msgspec.Struct, frozen=True):
    """One search result."""

    title: str
    url: str
    snippet: str = ""


class SearchProvider(abc.ABC):
    """A web search API. ``search`` raises ``ToolError`` (its message goes to the model) when the API fails."""

    name: ClassVar[str] = ""

    def __init__(self, settings: SearchSettings, client: httpx.AsyncClient) -> None:
        self.settings = settings
        self.client = client
        base = settings.base_url or DEFAULT_BASE_URLS.get(self.name)
        if not base:
            raise ConfigError(f"search provider {self.name} needs base_url", field="benchmark.params.search.base_url")
        self.base_url = base.rstrip("/")

    @abc.abstractmethod
    async def search(self, query: str, max_results: int) -> list[SearchHit]:
        """Up to ``max_results`` results for ``query``."""

    async def _get_json(self, url: str, params: dict[str, Any], headers: dict[str, str]) -> Any:
        try:
            async with self.client.stream("GET", url, params=params, headers=headers) as resp:
                body = bytearray()
                async for chunk in resp.aiter_bytes():
                    body += chunk
                    if len(body) > _MAX_SEARCH_BYTES:
                        raise ToolError(f"the {self.name} search answer is over {_MAX_SEARCH_BYTES} bytes")
        except httpx.TimeoutException:
            raise ToolError(f"the {self.name} search API did not answer within {self.settings.timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"the {self.name} search API is unreachable ({type(exc).__name__})") from None
        if resp.status_code != 200:
            raise ToolError(f"the {self.name} search API answered HTTP {resp.status_code}: "
                            f"{bytes(body[:200]).decode('utf-8', 'replace')}")
        try:
            data = msgspec.json.decode(bytes(body))
        except msgspec.DecodeError:
            raise ToolError(f"the {self.name} search API answered something that is not JSON") from None
        except RecursionError:
            deep = True
        else:
            deep = nesting_depth(data, MAX_DEPTH) > MAX_DEPTH
        if deep:
            raise ToolError(f"the {self.name} search API answered JSON nested deeper than {MAX_DEPTH} levels")
        return data


def _text(value: Any) -> str:
    return _strip_tags(value[:_FIELD_SOURCE_CHARS])[:_SNIPPET_CHARS] if isinstance(value, str) else ""


def _url(value: Any) -> str:
    return value[:_URL_CHARS] if isinstance(value, str) else ""


class BraveSearch(SearchProvider):
    """The Brave Search API (web results)."""

    name = "brave"

    async def search(self, query: str, max_results: int) -> list[SearchHit]:
        headers = {"Accept": "application/json"}
        if key := self.settings.key():
            headers["X-Subscription-Token"] = key
        data = await self._get_json(f"{self.base_url}/res/v1/web/search",
                                    {"q": query, "count": min(max_results, 20)}, headers)
        results = ((data or {}).get("web") or {}).get("results") if isinstance(data, dict) else None
        if results is None:
            return []
        if not isinstance(results, list):
            raise ToolError("the brave search answer has no list of web results")
        return [SearchHit(title=_text(r.get("title")), url=_url(r.get("url")), snippet=_text(r.get("description")))
                for r in results[:max_results] if isinstance(r, dict) and r.get("url")]


class SearxngSearch(SearchProvider):
    """A SearXNG instance's JSON API."""

    name = "searxng"

    async def search(self, query: str, max_results: int) -> list[SearchHit]:
        headers = {"Accept": "application/json"}
        if key := self.settings.key():
            headers["Authorization"] = f"Bearer {key}"
        data = await self._get_json(f"{self.base_url}/search", {"q": query, "format": "json"}, headers)
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise ToolError("the searxng answer has no list of results")
        return [SearchHit(title=_text(r.get("title")), url=_url(r.get("url")), snippet=_text(r.get("content")))
                for r in results[:max_results] if isinstance(r, dict) and r.get("url")]


PROVIDERS: dict[str, type[SearchProvider]] = {"brave": BraveSearch, "searxng": SearxngSearch}

_TOOL_SPECS: dict[str, dict[str, Any]] = {
    "web_search": {"type": "function", "function": {
        "name": "web_search", "description": "Search the web. Returns the top results: title, URL and a snippet.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "the query"}},
                       "required": ["query"]}}},
    "fetch_url": {"type": "function", "function": {
        "name": "fetch_url", "description": "Fetch a web page (http or https) and return its text.",
        "parameters": {"type": "object", "properties": {"url": {"type": "string", "description": "the URL"}},
                       "required": ["url"]}}},
}

# every pattern here runs in time linear in the text: a page or an API answer is hostile input, and a pattern that
# rescans from each '<' to the end (``<[^>]+>``, ``<script.*?</script>``) is quadratic on unclosed tags
_SCRIPT_OPEN = re.compile(r"<(script|style|noscript)\b", re.IGNORECASE)
_SCRIPT_CLOSE = {name: re.compile(rf"</{name}\s*>", re.IGNORECASE) for name in ("script", "style", "noscript")}
_TAG = re.compile(r"<[^<>]*>")
_BLANKS = re.compile(r"[ \t\r\f\v]+")
_LINES = re.compile(r"\n\s*\n+")


def _drop_scripts(text: str) -> str:
    """``text`` without script, style and noscript elements (an unclosed one runs to the end, as in a browser)."""
    parts: list[str] = []
    pos = 0
    while (opened := _SCRIPT_OPEN.search(text, pos)) is not None:
        parts.append(text[pos:opened.start()])
        closed = _SCRIPT_CLOSE[opened.group(1).lower()].search(text, opened.end())
        if closed is None:
            pos = len(text)
            break
        parts.append(" ")
        pos = closed.end()
    parts.append(text[pos:])
    return "".join(parts)


def _strip_tags(text: str) -> str:
    text = _TAG.sub(" ", _drop_scripts(text))
    return _LINES.sub("\n\n", _BLANKS.sub(" ", html.unescape(text))).strip()


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def is_public(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ``addr`` is globally routable, judging an IPv6 address that carries an IPv4 one (mapped, 6to4,
    NAT64) by that IPv4 address."""
    if isinstance(addr, ipaddress.IPv6Address):
        inner = addr.ipv4_mapped or addr.sixtofour
        if inner is None and addr in _NAT64:
            inner = ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
        if inner is not None:
            return is_public(inner)
    return addr.is_global and not addr.is_multicast


async def resolve_public(host: str, *, allow_private: bool = False) -> str:
    """The address to connect to for ``host`` (resolved once); ToolError when it resolves to no address, or to
    any address that is not public (unless ``allow_private``)."""
    try:
        addrs = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ToolError(f"cannot resolve {host}: {exc}") from None
        addrs = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not addrs:
        raise ToolError(f"cannot resolve {host}: no address")
    if not allow_private:
        for addr in addrs:
            if not is_public(addr):
                raise ToolError(f"{host} is on a private network ({addr}); fetch_url only reaches public hosts")
    return str(addrs[0])


class WebToolSession(ToolSession):
    """The conversation of one QA try: the question, and the configured web tools (none: one answer)."""

    def __init__(self, messages: list[dict[str, Any]], tools: tuple[str, ...], settings: SearchSettings | None) -> None:
        self._messages = messages
        self._tools = tools
        self.settings = settings or SearchSettings()
        self.calls: list[dict[str, Any]] = []
        self._client: httpx.AsyncClient | None = None
        self._provider: SearchProvider | None = None

    def tools(self) -> list[dict[str, Any]]:
        return [_TOOL_SPECS[t] for t in self._tools]

    def initial_messages(self) -> list[dict[str, Any]]:
        return list(self._messages)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            t = self.settings.timeout_s
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(t), follow_redirects=False,
                                             headers={"User-Agent": "agentcompass-research-agent"})
        return self._client

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        if name not in self._tools:
            raise ToolError(f"tool {name!r} is not available")
        started = time.monotonic()
        entry: dict[str, Any] = {"tool": name, "arguments": arguments}
        self.calls.append(entry)
        limit = self.settings.timeout_s
        try:
            try:
                async with asyncio.timeout(limit):  # the whole call, not each read: a trickling server is cut
                    if name == "web_search":
                        out, entry["results"] = await self._search(arguments)
                    else:
                        out = await self._fetch(arguments)
                        entry["chars"] = len(out)
            except TimeoutError:
                raise ToolError(f"{name} did not finish within timeout_s={limit:g}s") from None
        except ToolError as exc:
            message = str(exc)
            for secret in self.settings.secrets():  # an API may echo the key: it must not reach the model
                message = message.replace(secret, "***")
            entry["error"] = message
            raise ToolError(message) from None
        finally:
            entry["latency_s"] = round(time.monotonic() - started, 6)
        return out

    async def _search(self, arguments: dict[str, Any]) -> tuple[str, int]:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("web_search needs a non-empty string `query`")
        if self._provider is None:
            self._provider = PROVIDERS[self.settings.provider](self.settings, self._http())
        hits = await self._provider.search(query.strip(), self.settings.max_results)
        if not hits:
            return "No results.", 0
        lines = [f"[{i}] {h.title}\n{h.url}\n{h.snippet}".rstrip() for i, h in enumerate(hits, 1)]
        return "\n\n".join(lines), len(hits)

    async def _fetch(self, arguments: dict[str, Any]) -> str:
        url = arguments.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ToolError("fetch_url needs a string `url`")
        url = url.strip()
        for _ in range(5):  # redirects followed by hand: each hop's host is checked
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ToolError(f"fetch_url takes http(s) URLs, got {url!r}")
            try:
                port = parts.port
            except ValueError:
                raise ToolError(f"fetch_url got a URL with a bad port: {url!r}") from None
            ip = await resolve_public(parts.hostname, allow_private=self.settings.allow_private_hosts)
            # connect to the checked address; the name stays in Host and in TLS (SNI, certificate check)
            netloc = f"[{ip}]" if ":" in ip else ip
            if port is not None:
                netloc += f":{port}"
            target = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
            host_header = parts.hostname if port is None else f"{parts.hostname}:{port}"
            extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
            try:
                async with self._http().stream("GET", target, headers={"Host": host_header},
                                               extensions=extensions) as resp:
                    if resp.is_redirect and resp.headers.get("location"):
                        url = urljoin(url, resp.headers["location"])
                        continue
                    body = bytearray()
                    async for chunk in resp.aiter_bytes():
                        body += chunk
                        if len(body) >= self.settings.fetch_max_bytes:
                            break
            except httpx.TimeoutException:
                raise ToolError(f"{url} did not answer within {self.settings.timeout_s:g}s") from None
            except httpx.HTTPError as exc:
                raise ToolError(f"fetching {url} failed ({type(exc).__name__})") from None
            if resp.status_code >= 400:
                raise ToolError(f"{url} answered HTTP {resp.status_code}")
            text = bytes(body[:self.settings.fetch_max_bytes]).decode(resp.encoding or "utf-8", "replace")
            if "html" in resp.headers.get("content-type", "").lower() or text.lstrip()[:1] == "<":
                text = _strip_tags(text)
            return text or "(empty page)"
        raise ToolError(f"{url}: too many redirects")

    def record(self) -> dict[str, Any]:
        return {"tools": list(self._tools), "calls": list(self.calls)}

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


__all__ = ["PROVIDERS", "BraveSearch", "SearchHit", "SearchProvider", "SearchSettings", "SearxngSearch",
           "WebToolSession", "is_public", "resolve_public"]
