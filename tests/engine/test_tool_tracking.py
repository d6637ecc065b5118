"""Tool schema tracking (seed 000) through the public API: the reference's test list, one test each, plus
``chat(tools=)`` linking both commits (issue 16 item 5)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tractkv import ScriptExhausted, Tract
from tractkv.engine.content.toolsets import tool_schema
from tractkv.llm import ScriptedLLM
from tractkv.model import ToolSet, object_id


def tool(name: str, description: str = "d", **props: Any) -> dict[str, Any]:
    params = {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


WEATHER = tool("get_weather", "Weather for a city", city="string")
SEARCH = tool("search", "Search the web", q="string")


def toolset_ids(t: Tract, toolset_id: Any) -> tuple[str, ...]:
    stored = t.store.get(toolset_id)
    assert isinstance(stored, ToolSet)
    return stored.tools


def reordered(schema: dict[str, Any]) -> dict[str, Any]:
    """The same schema with every dict's keys in reverse order."""
    if isinstance(schema, dict):
        return {k: reordered(schema[k]) for k in reversed(list(schema))}
    return schema


# --- TestToolTracking -------------------------------------------------------------------------------------------


def test_commit_with_tools() -> None:
    with Tract.open() as t:
        made = t.user("hi", tools=[WEATHER, SEARCH])
        assert made.toolset_id is not None
        assert t.get_commit_tools(made.commit_id) == [WEATHER, SEARCH]
        assert t.get_commit(made.commit_id).toolset_id == made.toolset_id


def test_commit_without_tools() -> None:
    with Tract.open() as t:
        made = t.user("hi")
        assert made.toolset_id is None
        assert t.get_commit_tools(made.commit_id) == []
        assert t.compile().tools == ()


def test_tool_deduplication() -> None:
    with Tract.open() as t:
        a = t.user("a", tools=[WEATHER])
        b = t.user("b", tools=[reordered(WEATHER)])  # same content, keys in another order
        c = t.user("c", tools=[SEARCH, WEATHER])
        # one stored schema: identity is the canonical form; the key order is the tool set's (issue 32 item 5)
        assert toolset_ids(t, a.toolset_id) == toolset_ids(t, b.toolset_id)
        assert a.toolset_id != b.toolset_id
        assert toolset_ids(t, c.toolset_id)[1] == toolset_ids(t, a.toolset_id)[0]
        assert len(t.tool_versions("get_weather")) == 1


def test_tool_versioning() -> None:
    with Tract.open() as t:
        v2 = tool("get_weather", "Weather for a city, in a unit", city="string", unit="string")
        first = t.user("a", tools=[WEATHER])
        second = t.user("b", tools=[v2])
        assert toolset_ids(t, first.toolset_id) != toolset_ids(t, second.toolset_id)
        assert t.tool_versions("get_weather") == [WEATHER, v2]  # oldest first
        assert t.get_commit_tools(first.commit_id) == [WEATHER]  # provenance keeps the old version


def test_compile_returns_tools() -> None:
    with Tract.open() as t:
        t.system("be brief")
        t.user("hi", tools=[WEATHER, SEARCH])
        ctx = t.compile()
        assert list(ctx.tools) == [WEATHER, SEARCH]
        assert [m.role for m in ctx.messages] == ["system", "user"]  # tools are not messages


def test_compile_no_tools() -> None:
    with Tract.open() as t:
        t.user("hi")
        t.assistant("hello")
        assert t.compile().tools == ()
        assert "tools" not in t.compile().to_openai_params()
        assert "tools" not in t.compile().to_anthropic_params()


def test_compile_latest_tools_win() -> None:
    with Tract.open() as t:
        first = t.user("a", tools=[WEATHER, SEARCH])
        t.user("b", tools=[SEARCH])
        plain = t.user("c")  # no tools given: the latest set stays in force
        assert list(t.compile().tools) == [SEARCH]
        assert list(t.compile(first.commit_id).tools) == [WEATHER, SEARCH]
        assert plain.toolset_id is None


def test_set_tools_auto_links() -> None:
    with Tract.open() as t:
        assert t.set_tools([WEATHER]) == [WEATHER]
        a = t.user("a")
        b = t.assistant("b")
        assert a.toolset_id == b.toolset_id is not None
        assert t.get_tools() == [WEATHER]
        explicit = t.user("c", tools=[SEARCH])  # explicit tools win for that commit
        assert t.get_commit_tools(explicit.commit_id) == [SEARCH]
        assert t.get_commit_tools(t.user("d").commit_id) == [WEATHER]  # the setting still applies


def test_set_tools_clear() -> None:
    with Tract.open() as t:
        t.set_tools([WEATHER])
        t.user("a")
        t.set_tools(None)
        cleared = t.user("b")
        assert t.get_commit_tools(cleared.commit_id) == []
        assert t.compile().tools == ()
        assert t.get_tools() == []
        assert t.user("c").toolset_id is None  # the empty set is linked once


def test_get_commit_tools() -> None:
    with Tract.open() as t:
        a = t.user("a", tools=[WEATHER])
        b = t.user("b", tools=[SEARCH, WEATHER])
        assert t.get_commit_tools(a.commit_id) == [WEATHER]
        assert t.get_commit_tools(b.commit_id) == [SEARCH, WEATHER]  # order kept (position)
        assert t.get_commit_tools("HEAD~1") == [WEATHER]


def test_to_openai_params_includes_tools() -> None:
    with Tract.open() as t:
        t.user("hi", tools=[WEATHER])
        params = t.compile().to_openai_params()
        assert params["tools"] == [WEATHER]
        assert params["messages"] == [{"role": "user", "content": "hi"}]


def test_to_anthropic_params_includes_tools() -> None:
    with Tract.open() as t:
        t.system("sys")
        t.user("hi", tools=[WEATHER])
        params = t.compile().to_anthropic_params()
        assert params["system"] == "sys"
        assert params["tools"] == [
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "input_schema": WEATHER["function"]["parameters"],
            }
        ]


def test_to_openai_backward_compat() -> None:
    with Tract.open() as t:
        t.user("hi", tools=[WEATHER])
        assert t.compile().to_openai() == [{"role": "user", "content": "hi"}]  # messages only, a list


def test_chat_with_tools() -> None:
    llm = ScriptedLLM(["sunny"])
    with Tract.open(llm=llm) as t:
        reply = t.chat("weather in Oslo?", tools=[WEATHER])
        user = t.get_commit("HEAD~1")
        assert user.role == "user"
        assert user.toolset_id == reply.toolset_id is not None  # both commits link the tools (issue 16, 5)
        assert t.get_commit_tools(user.commit_id) == t.get_commit_tools(reply.commit_id) == [WEATHER]
        assert llm.calls[0].tools == [WEATHER]
        assert t.compile().to_openai_params()["tools"] == [WEATHER]


def test_chat_without_tools_links_the_tools_in_force_to_both() -> None:
    llm = ScriptedLLM(["one", "two"])
    with Tract.open(llm=llm) as t:
        t.chat("plain")
        assert [c.toolset_id for c in t.log()] == [None, None]
        t.set_tools([SEARCH])
        reply = t.chat("again")
        assert t.get_commit("HEAD~1").toolset_id == reply.toolset_id is not None
        assert llm.calls[1].tools == [SEARCH]


def test_chat_with_tools_commits_nothing_when_the_model_fails() -> None:
    with Tract.open(llm=ScriptedLLM([])) as t:
        with pytest.raises(ScriptExhausted):
            t.chat("hi", tools=[WEATHER])
        assert t.log() == []  # neither the user message nor its tool link landed


def test_generate_with_tools() -> None:
    llm = ScriptedLLM(["ok"])
    with Tract.open(llm=llm) as t:
        user = t.user("hi")
        reply = t.generate(tools=[SEARCH])
        assert llm.calls[0].tools == [SEARCH]
        assert t.get_commit_tools(reply.commit_id) == [SEARCH]
        assert user.toolset_id is None  # generate links the reply; chat links both


def test_compress_keeps_the_tools_in_force() -> None:
    with Tract.open() as t:
        t.user("a", tools=[WEATHER])
        t.assistant("b")
        summary = t.compress(content="a and b")
        assert t.get_commit_tools(summary.commit_id) == [WEATHER]
        assert list(t.compile().tools) == [WEATHER]


# --- TestToolSchemaHashing ----------------------------------------------------------------------------------------


def test_deterministic_hash() -> None:
    assert object_id(tool_schema(copy.deepcopy(WEATHER))) == object_id(tool_schema(WEATHER))
    assert len(object_id(tool_schema(WEATHER))) == 64  # a blake3 hex digest (the reference: SHA-256)


def test_key_order_independent() -> None:
    assert object_id(tool_schema(reordered(WEATHER))) == object_id(tool_schema(WEATHER))
    with Tract.open() as t:
        a = t.user("a", tools=[WEATHER])
        b = t.user("b", tools=[reordered(WEATHER)])
        assert toolset_ids(t, a.toolset_id) == toolset_ids(t, b.toolset_id)


def test_different_schema_different_hash() -> None:
    assert object_id(tool_schema(WEATHER)) != object_id(tool_schema(SEARCH))
    changed = copy.deepcopy(WEATHER)
    changed["function"]["description"] = "Weather"
    assert object_id(tool_schema(changed)) != object_id(tool_schema(WEATHER))


def test_set_tools_is_a_per_branch_setting_that_survives_reopening(tmp_path: Any) -> None:
    path = str(tmp_path / "s.tkv")
    with Tract.open(path) as t:
        t.set_tools([WEATHER])
        t.user("a")
        t.branch("other")
        t.set_tools([SEARCH])
        t.switch("main")
        assert t.get_commit_tools(t.user("b").commit_id) == [WEATHER]  # main's setting, not other's
    with Tract.open(path) as t:  # a departure: the reference keeps it on the handle only
        assert t.get_tools() == [WEATHER]
        assert t.get_commit_tools(t.user("c").commit_id) == [WEATHER]
        t.switch("other")
        assert t.get_tools() == [SEARCH]
