"""The toolkit's tool definitions are accepted tool shapes: stored, named and rendered back unchanged."""

from __future__ import annotations

from tractkv import Tract
from tractkv.engine.content import schema_name, tool_schemas
from tractkv.engine.content.render.anthropic import tool_to_anthropic
from tractkv.engine.content.render.openai import tool_to_openai
from tractkv.toolkit import FULL_PROFILE
from tractkv.toolkit.profiles import profile_tools


def test_builtin_definitions_in_both_formats_are_accepted_and_render_back_unchanged() -> None:
    definitions = profile_tools(FULL_PROFILE)
    assert len(definitions) == 15
    for definition in definitions:
        for rendered in (definition.to_openai(), definition.to_anthropic()):
            assert schema_name(rendered) == definition.name
            assert tool_to_openai(rendered) == definition.to_openai()
            assert tool_to_anthropic(rendered) == definition.to_anthropic()
    for fmt in ("openai", "anthropic"):
        stored = tool_schemas([d.to_format(fmt) for d in definitions])
        assert [s.name for s in stored] == [d.name for d in definitions]


def test_a_tract_offering_the_builtins_counts_them_in_its_total() -> None:
    definitions = profile_tools(FULL_PROFILE)
    t = Tract.open()
    t.user("hi")
    before = t.compile().token_count
    t.set_tools([d.to_anthropic() for d in definitions])
    t.user("again")
    after = t.compile()
    assert after.token_count - before > 15 * 20  # every tool costs at least its name, text and framing
    assert after.to_openai_params()["tools"] == [d.to_openai() for d in definitions]
