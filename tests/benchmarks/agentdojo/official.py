"""AgentDojo's own API for the differential tests (``test_agentdojo.py`` imports this module on first use), and the
two agents those tests run with AgentDojo's own runner."""

from __future__ import annotations

from typing import Any

from agentdojo.agent_pipeline.agent_pipeline import load_system_message
from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.task_suite.load_suites import get_suite, get_suites
from agentdojo.types import ChatAssistantMessage, ChatToolResultMessage, text_content_block_from_string

__all__ = ["GroundTruthPipeline", "ScriptedLLM", "UserThenInjection", "get_suite", "get_suites", "load_system_message"]


class UserThenInjection(BasePipelineElement):
    """An agent for AgentDojo's own runner: the user task's ground-truth calls, then the injection task's, then the
    user task's answer (an agent that does its job and also obeys the injection)."""

    def __init__(self, user_task: Any, injection_task: Any) -> None:
        self.user_task, self.injection_task = user_task, injection_task
        self.calls: list[dict[str, Any]] = []

    def query(self, query: str, runtime: Any, env: Any = None, messages: Any = (), extra_args: Any = None) -> Any:
        calls = self.user_task.ground_truth(env) + self.injection_task.ground_truth(env)
        self.calls = [{"function": c.function, "args": dict(c.args)} for c in calls]
        out = list(messages)
        for c in calls:
            empty = [text_content_block_from_string("")]
            out.append(ChatAssistantMessage(role="assistant", tool_calls=[c], content=empty))
            result, _ = runtime.run_function(env, c.function, c.args)
            out.append(ChatToolResultMessage(role="tool", tool_call=c, tool_call_id=None, error=None,
                                             content=[text_content_block_from_string(tool_result_to_str(result))]))
        out.append(ChatAssistantMessage(role="assistant", tool_calls=None,
                                        content=[text_content_block_from_string(self.user_task.GROUND_TRUTH_OUTPUT)]))
        return query, runtime, env, out, extra_args or {}


class ScriptedLLM(BasePipelineElement):
    """AgentDojo's side of a side-by-side run: the same turns as the scripted model's."""

    def __init__(self, turns: list[Any]) -> None:
        self.turns = turns
        self.calls = 0

    def query(self, query: Any, runtime: Any, env: Any = None, messages: Any = (), extra_args: Any = None) -> Any:
        from agentdojo.functions_runtime import FunctionCall

        turn = self.turns[self.calls]
        self.calls += 1
        if isinstance(turn, str):
            message = ChatAssistantMessage(role="assistant", content=[text_content_block_from_string(turn)],
                                           tool_calls=None)
        else:
            message = ChatAssistantMessage(role="assistant", content=[text_content_block_from_string(turn["content"])],
                                           tool_calls=[
                FunctionCall(function=c["name"], args=c["arguments"], id=f"c{self.calls}_{n}")
                for n, c in enumerate(turn["tool_calls"])])
        return query, runtime, env, [*messages, message], extra_args or {}
