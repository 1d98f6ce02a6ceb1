"""The web tools of research agents (``agentcompass.tools_search``) against a local stand-in speaking the search
APIs' real wire formats: results formatted for the model, API failures returned to the model as tool errors,
``fetch_url`` reading pages and refusing the host's own networks."""

from __future__ import annotations

from typing import Any

import pytest

from agentcompass.tools import ToolError
from agentcompass.tools_search import SearchSettings, WebToolSession

from .standins.search_api import SearchStandIn

HITS = {"rayleigh scattering": [
    ("Rayleigh scattering - Wikipedia", "https://en.wikipedia.org/wiki/Rayleigh_scattering",
     "<b>Rayleigh scattering</b> is the scattering of light by particles much smaller than its wavelength."),
    ("Why is the sky blue?", "https://example.org/sky", "Short wavelengths scatter more &amp; the sky looks blue.")]}


def _session(settings: dict[str, Any], tools: tuple[str, ...] = ("web_search", "fetch_url")) -> WebToolSession:
    return WebToolSession([{"role": "user", "content": "q"}], tools, SearchSettings(**settings))


@pytest.mark.parametrize("provider", ["brave", "searxng"])
async def test_search_results_reach_the_model_as_text(provider: str) -> None:
    with SearchStandIn(results=HITS) as api:
        session = _session({"provider": provider, "base_url": api.url, "api_key": api.key, "max_results": 1})
        try:
            out = await session.call("web_search", {"query": "Rayleigh scattering"})
        finally:
            await session.aclose()
        path, query, _ = api.requests[0]
    assert out.startswith("[1] Rayleigh scattering - Wikipedia\nhttps://en.wikipedia.org/wiki/Rayleigh_scattering\n")
    assert "<b>" not in out and "Why is the sky blue" not in out  # tags stripped, max_results kept
    assert session.record()["calls"][0]["results"] == 1
    assert path == ("/res/v1/web/search" if provider == "brave" else "/search")
    if provider == "brave":
        assert query["count"] == ["1"]
    else:
        assert query["format"] == ["json"]


async def test_a_refused_key_is_a_tool_error_the_model_sees() -> None:
    with SearchStandIn(results=HITS) as api:
        session = _session({"provider": "brave", "base_url": api.url, "api_key": "wrong-key"})
        with pytest.raises(ToolError, match="HTTP 401"):
            await session.call("web_search", {"query": "Rayleigh scattering"})
        await session.aclose()
    assert "HTTP 401" in session.record()["calls"][0]["error"]


async def test_bad_arguments_and_unoffered_tools_are_refused() -> None:
    session = _session({"provider": "brave", "base_url": "http://127.0.0.1:9"}, tools=("web_search",))
    with pytest.raises(ToolError, match="non-empty string `query`"):
        await session.call("web_search", {"query": ""})
    with pytest.raises(ToolError, match="not available"):
        await session.call("fetch_url", {"url": "https://example.org"})
    assert [t["function"]["name"] for t in session.tools()] == ["web_search"]


async def test_fetch_url_reads_a_page_as_text() -> None:
    page = "<html><head><style>p{}</style><script>var x=1</script></head><body><p>Hello &amp; welcome</p></body></html>"
    with SearchStandIn(pages={"hello": page}) as api:
        session = _session({"base_url": api.url, "allow_private_hosts": True})
        try:
            out = await session.call("fetch_url", {"url": f"{api.url}/page/hello"})
            with pytest.raises(ToolError, match="HTTP 404"):
                await session.call("fetch_url", {"url": f"{api.url}/page/missing"})
        finally:
            await session.aclose()
    assert out == "Hello & welcome"


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/admin", "http://localhost/", "http://10.1.2.3/",
                                 "http://169.254.169.254/latest/meta-data", "file:///etc/passwd",
                                 "http://100.100.100.200/latest/meta-data",  # shared 100.64/10 (a cloud's metadata)
                                 "http://[2002:7f00:1::1]/", "http://[::ffff:127.0.0.1]/", "http://[64:ff9b::a01:203]/"])
async def test_fetch_url_refuses_the_hosts_own_networks(url: str) -> None:
    session = _session({})
    with pytest.raises(ToolError, match="private network|http\\(s\\) URLs"):
        await session.call("fetch_url", {"url": url})
    await session.aclose()


async def test_fetch_url_connects_to_the_address_it_checked_not_a_second_resolution(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a DNS-rebinding name: public on the first lookup, loopback on every later one
    import socket

    lookups: list[str] = []
    real = socket.getaddrinfo

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host in ("rebind.example", b"rebind.example"):
            lookups.append(str(host))
            ip = "93.184.215.14" if len(lookups) == 1 else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, 0))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with SearchStandIn(pages={"admin": "INTERNAL-ADMIN-PAGE"}) as api:
        port = api.url.rsplit(":", 1)[1]
        session = _session({"base_url": api.url, "timeout_s": 1})
        try:
            with pytest.raises(ToolError) as err:
                await session.call("fetch_url", {"url": f"http://rebind.example:{port}/page/admin"})
        finally:
            await session.aclose()
        served = list(api.requests)
    assert lookups == ["rebind.example"]  # resolved once: the connection went to the public address checked
    assert "INTERNAL-ADMIN-PAGE" not in str(err.value) and not served


async def test_a_tool_call_is_bounded_as_a_whole_not_per_read() -> None:
    from .standins.file_host import FileHost

    with FileHost() as host:  # a byte every 0.3 s: no single read waits long, the page never ends in time
        host.files["/slow"] = b"x" * 100
        host.drip["/slow"] = 0.3
        session = _session({"base_url": host.url, "allow_private_hosts": True, "timeout_s": 1})
        try:
            with pytest.raises(ToolError, match="fetch_url did not finish within timeout_s=1s"):
                await session.call("fetch_url", {"url": host.url + "/slow"})
        finally:
            await session.aclose()
    assert session.calls[0]["error"] == "fetch_url did not finish within timeout_s=1s"


async def test_an_api_echoing_the_key_does_not_show_it_to_the_model() -> None:
    with SearchStandIn(results=HITS, echo_token=True) as api:
        session = _session({"provider": "brave", "base_url": api.url, "api_key": "wrong-" + api.key})
        try:
            with pytest.raises(ToolError) as err:
                await session.call("web_search", {"query": "rayleigh scattering"})
        finally:
            await session.aclose()
    assert "HTTP 401" in str(err.value) and "(got ***)" in str(err.value)
    assert "wrong-" + api.key not in str(err.value) and "wrong-" + api.key not in session.calls[0]["error"]
