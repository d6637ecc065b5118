"""Profiles and the 15 built-in tools' schemas and descriptions."""

from __future__ import annotations

from typing import Any

import pytest

from tractkv import toolkit
from tractkv.toolkit import (
    FULL_PROFILE,
    SELF_PROFILE,
    SUPERVISOR_PROFILE,
    ToolConfig,
    ToolDefinition,
    ToolProfile,
    get_profile,
)
from tractkv.toolkit.builtin import BUILTIN_NAMES, builtin_tools

ALL = [
    "commit",
    "compile",
    "annotate",
    "status",
    "log",
    "diff",
    "compress",
    "branch",
    "switch",
    "merge",
    "reset",
    "checkout",
    "gc",
    "list_branches",
    "get_commit",
]
SELF = ["commit", "compile", "annotate", "status", "log", "compress", "branch", "switch", "reset"]


def _names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["function"]["name"] if "function" in t else t["name"] for t in tools]


def test_profiles_offer_the_documented_tools() -> None:
    assert list(BUILTIN_NAMES) == ALL
    assert list(SELF_PROFILE.tool_names) == SELF
    assert list(SUPERVISOR_PROFILE.tool_names) == ALL
    assert list(FULL_PROFILE.tool_names) == ALL
    assert _names(toolkit.as_tools()) == SELF  # "self" is the default
    assert _names(toolkit.as_tools(profile="supervisor")) == ALL
    assert _names(toolkit.as_tools(profile="full", format="anthropic")) == ALL


def test_descriptions_speak_to_the_profile() -> None:
    own = {x["function"]["name"]: x["function"]["description"] for x in toolkit.as_tools("self")}
    managed = {x["function"]["name"]: x["function"]["description"] for x in toolkit.as_tools("supervisor")}
    full = {x["function"]["name"]: x["function"]["description"] for x in toolkit.as_tools("full")}
    for name in SELF:
        assert "your" in own[name].lower(), name
        assert own[name] != full[name]
    for name in ALL:
        assert "managed agent" in managed[name], name
        assert "managed agent" not in full[name]
        assert "your " not in full[name].lower()
    for text in (own["compress"], managed["compress"], full["compress"]):
        assert "model" in text
        assert "content" in text  # compress without content needs a model
    assert "never needs a model" in full["merge"].lower()


def test_every_builtin_has_a_complete_schema() -> None:
    for definition in builtin_tools():
        params = definition.parameters
        assert params["type"] == "object"
        assert params["additionalProperties"] is False
        for prop, schema in params["properties"].items():
            assert "type" in schema, (definition.name, prop)
            assert schema.get("description"), (definition.name, prop)
        assert len(definition.description) > 80, definition.name  # says when and why, not just what


def test_anthropic_format_and_overrides() -> None:
    tools = toolkit.as_tools("self", overrides={"status": "Custom status text."}, format="anthropic")
    status = next(x for x in tools if x["name"] == "status")
    assert status == {
        "name": "status",
        "description": "Custom status text.",
        "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
    }
    with pytest.raises(ValueError, match="does not offer"):
        toolkit.as_tools("self", overrides={"gc": "x"})
    with pytest.raises(ValueError, match="format"):
        toolkit.as_tools(format="xml")


def test_get_profile_and_custom_profiles() -> None:
    assert get_profile("self") is SELF_PROFILE
    assert get_profile(FULL_PROFILE) is FULL_PROFILE
    with pytest.raises(ValueError, match="unknown tool profile 'admin'"):
        get_profile("admin")
    custom = ToolProfile(
        "reader",
        {"log": ToolConfig(), "gc": ToolConfig(enabled=False), "status": ToolConfig(description="S.")},
    )
    filtered = custom.filter_tools(builtin_tools())
    assert [d.name for d in filtered] == ["status", "log"]  # the tools' order, not the config's
    assert filtered[0].description == "S."
    assert all(isinstance(d, ToolDefinition) for d in filtered)
    assert _names(toolkit.as_tools(custom)) == ["status", "log"]
