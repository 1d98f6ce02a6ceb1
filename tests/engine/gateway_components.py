"""A harness whose agent runs *inside* the environment and finds its model only through the env vars the engine
sets (like a sandboxed CLI agent would): it dumps ``env``, then calls ``$OPENAI_BASE_URL`` with ``$OPENAI_API_KEY``
using nothing but python3's urllib."""

from __future__ import annotations

import logging
import shlex
from typing import Any, ClassVar

from agentcompass.interfaces import (
    ComponentContext,
    Environment,
    Harness,
    HarnessResult,
    ModelClient,
    PreparedTask,
    RunContext,
)

CALL_SCRIPT = r"""
import json, os, sys, urllib.error, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
body = {"model": "whatever-the-agent-wants", "messages": [{"role": "user", "content": sys.argv[1]}]}
req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                             headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    with opener.open(req, timeout=30) as r:
        answer = json.load(r)
    print("STATUS", r.status, json.dumps(answer["choices"][0]["message"]["content"]))
except urllib.error.HTTPError as e:
    print("STATUS", e.code, e.read().decode()[:300])
"""


class GatewayCallHarness(Harness):
    """Params: ``prompt`` (what the agent asks), ``calls`` (how many times, default 1)."""

    evaluates: ClassVar[bool] = False
    needs_environment: ClassVar[bool] = True

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.prompt = str(params.get("prompt", "What is the capital of France?"))
        self.calls = int(params.get("calls", 1))

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        assert env is not None
        dump = await env.exec("env | sort", timeout=30)
        cmd = f"python3 -c {shlex.quote(CALL_SCRIPT)} {shlex.quote(self.prompt)}"
        outputs = [(await env.exec(cmd, timeout=60)).output.strip() for _ in range(self.calls)]
        return HarnessResult(final_answer="\n".join(outputs), artifacts={"env": dump.stdout})
