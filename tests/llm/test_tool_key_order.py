"""Tool schemas keep the key order they were given in (issue 32, item 5): in compile output, in each dialect's
params and in the official SDKs' requests, after a reopen, a push, a clone and a bundle; while a schema's id
stays its canonical form (two orders of one schema are one ``tool`` object) and the order lives in the tool
set (``ToolSet.order``), verified on receive. A store written before (format 2, the golden objects) compiles
exactly as before, is read as it is by a read-only open and migrated by a writing one."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import anthropic
import lmdb
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tractkv import InvalidInput, Tract
from tractkv.engine.content import apply_key_order, key_order, put_toolset, tool_schemas
from tractkv.engine.history.validate import fsck_objects
from tractkv.errors import DecodeError, EncodeError, MergeConflict, RejectedObject
from tractkv.model import Commit, ToolSchema, ToolSet, decode, encode, object_id
from tractkv.store import STORE_FORMAT, LmdbStore, Table
from tractkv.store.fsck import fsck
from tractkv.sync.bundle import write_bundle

from .conftest import Recorder, anthropic_message, openai_completion

# Neither alphabetical nor canonical (length first): the order a user wrote, which strict mode follows.
PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what to look for"},
        "limit": {"type": "integer", "minimum": 1, "description": "at most"},
        "after": {"format": "date", "type": "string"},
    },
    "required": ["query", "limit", "after"],
    "additionalProperties": False,
}
SEARCH = {
    "type": "function",
    "function": {"name": "search", "strict": True, "parameters": PARAMETERS, "description": "Search"},
}
SEARCH_ANTHROPIC = {"name": "search", "description": "Search", "input_schema": PARAMETERS}
EXPECTED_OPENAI = {
    "type": "function",
    "function": {"name": "search", "description": "Search", "parameters": PARAMETERS, "strict": True},
}
EXPECTED_RESPONSES = {
    "type": "function",
    "name": "search",
    "description": "Search",
    "parameters": PARAMETERS,
    "strict": True,
}
EXPECTED_ANTHROPIC = {"name": "search", "description": "Search", "input_schema": PARAMETERS, "strict": True}


def same(a: Any, b: Any) -> bool:
    """Equal including the key order of every map (dict == ignores it)."""
    return json.dumps(a) == json.dumps(b)


def reordered(value: Any) -> Any:
    """``value`` with every map's keys in reverse order."""
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


def canonical(value: Any) -> Any:
    """``value`` as stored bytes decode it: every map in canonical key order."""
    return apply_key_order(value, None)


def tract_with(tools: list[dict[str, Any]], path: str | None = None) -> Tract:
    t = Tract.open(path, durable=False) if path else Tract.open()
    t.set_tools(tools)
    t.user("Find the report.")
    return t


def test_the_order_survives_compile_and_every_dialect() -> None:
    assert not same(canonical(PARAMETERS), PARAMETERS)  # the test means something
    with tract_with([SEARCH]) as t:
        ctx = t.compile()
        assert same(ctx.tools, (SEARCH,))
        assert same(t.get_tools(), [SEARCH])
        assert same(ctx.to_openai_params()["tools"], [EXPECTED_OPENAI])
        assert same(ctx.to_responses_params()["tools"], [EXPECTED_RESPONSES])
        assert same(ctx.to_anthropic_params()["tools"], [EXPECTED_ANTHROPIC])


def test_the_order_reaches_each_sdk_request(
    recorder: Recorder, openai_sdk: openai.OpenAI, anthropic_sdk: anthropic.Anthropic
) -> None:
    recorder.reply(openai_completion("ok"))
    recorder.reply({"id": "resp_1", "object": "response", "created_at": 1, "model": "m", "output": []})
    recorder.reply(anthropic_message())
    with tract_with([SEARCH]) as t:
        ctx = t.compile()
        openai_sdk.chat.completions.create(model="m", **ctx.to_openai_params())
        openai_sdk.responses.create(model="m", **ctx.to_responses_params())
        anthropic_sdk.messages.create(model="m", max_tokens=10, **ctx.to_anthropic_params())
    chat, responses, messages = recorder.bodies
    assert same(chat["tools"], [EXPECTED_OPENAI])
    assert same(responses["tools"], [EXPECTED_RESPONSES])
    assert same(messages["tools"], [EXPECTED_ANTHROPIC])


def test_an_anthropic_tool_keeps_its_order_too(
    recorder: Recorder, anthropic_sdk: anthropic.Anthropic
) -> None:
    recorder.reply(anthropic_message())
    with tract_with([SEARCH_ANTHROPIC]) as t:
        anthropic_sdk.messages.create(model="m", max_tokens=10, **t.compile().to_anthropic_params())
    assert same(recorder.bodies[0]["tools"], [SEARCH_ANTHROPIC])


def test_two_orders_of_one_schema_are_one_tool_and_the_tool_set_in_force_decides(tmp_path: Path) -> None:
    other = reordered(SEARCH)
    assert other == SEARCH
    assert not same(other, SEARCH)
    [a], [b] = tool_schemas([SEARCH]), tool_schemas([other])
    assert object_id(a) == object_id(b)  # identity is the canonical form
    with tract_with([SEARCH], str(tmp_path / "s")) as t:
        first = t.compile().head
        t.set_tools([other])
        t.user("Again.")
        assert same(t.compile().tools, (other,))  # the latest tool set's order wins
        assert same(t.compile(at=first).tools, (SEARCH,))  # each commit keeps its own
        assert t.tool_versions("search") == [canonical(SEARCH)]  # one version, shown in canonical order
        assert t.store.table_count(Table.TOOL_VERSIONS) == 1
        kinds = [decode(data).KIND for _, data in t.store.iter_raw_objects()]
        assert kinds.count("tool") == 1
        assert kinds.count("toolset") == 2


def test_a_canonical_order_writes_the_tool_set_written_before() -> None:
    """A schema given in canonical order records no order: its tool set is byte for byte the one earlier
    releases wrote (the golden TOOLSET's shape), so nothing changes for them."""
    schema = canonical(SEARCH)
    with Tract.open() as t:
        t.set_tools([schema])
        t.user("hi")
        toolset = t.store.get(t.compile().commit_ids[0])
        assert isinstance(toolset, Commit)
        assert toolset.tools is not None
        stored = t.store.get(toolset.tools)
        assert isinstance(stored, ToolSet)
        assert stored.order == ()
        assert stored == ToolSet(tools=(object_id(ToolSchema(name="search", schema=schema)),))


def test_a_reopened_pushed_cloned_and_bundled_store_compiles_the_same_order(tmp_path: Path) -> None:
    with tract_with([SEARCH, SEARCH_ANTHROPIC | {"name": "other"}], str(tmp_path / "a")) as a:
        want = a.compile().to_anthropic_params()["tools"]
        LmdbStore(str(tmp_path / "hub"), durable=False).close()
        a.remote_add("origin", str(tmp_path / "hub"))
        assert a.push().ok
        write_bundle(a.store, str(tmp_path / "a.tkvbundle"), {"refs/heads/main": a.compile().head})
    with Tract.open(str(tmp_path / "a"), readonly=True, create=False) as again:
        assert same(again.compile().to_anthropic_params()["tools"], want)
    with Tract.open(str(tmp_path / "hub"), readonly=True, create=False) as hub:
        assert same(hub.compile().to_anthropic_params()["tools"], want)
    for source, name in ((tmp_path / "hub", "b"), (tmp_path / "a.tkvbundle", "c")):
        with Tract.clone(str(source), str(tmp_path / name), durable=False) as clone:
            assert same(clone.compile().to_anthropic_params()["tools"], want)
            assert same(clone.compile().tools[0], SEARCH)
        with LmdbStore(str(tmp_path / name), durable=False) as st:
            assert fsck(st).ok


def _bad_set(tool: ToolSchema, order: Any) -> ToolSet:
    return ToolSet(tools=(object_id(tool),), order=(order,))


BAD_ORDERS = {
    "a key the map lacks": ((("function", "type", "extra"),), "lists keys"),
    "a key left out": ((("function",),), "lists keys"),
    "canonical order spelled out": ((("type", "function"),), "canonical order"),
    "more maps than the schema has": ((None, None, None, ("a", "b")), "maps ordered"),
}


@pytest.mark.parametrize("case", sorted(BAD_ORDERS))
def test_a_received_tool_set_whose_order_does_not_fit_is_refused(case: str, tmp_path: Path) -> None:
    order, reason = BAD_ORDERS[case]
    [tool] = tool_schemas([{"type": "function", "function": {"name": "f"}}])
    with Tract.open(str(tmp_path / "a"), durable=False) as a:
        batch = a.store.new_batch()
        put_toolset(batch, [tool])
        toolset = batch.put(_bad_set(tool, order))  # the write path never makes one; a hostile peer can
        a.store.apply(batch)
        a.user("hi", tools=[tool.schema])
        head = a.compile().head
        commit = a.store.get(head)
        assert isinstance(commit, Commit)
        forged = Commit(
            parents=commit.parents, content=commit.content, tools=toolset, created_at=commit.created_at
        )
        batch = a.store.new_batch()
        forged_id = batch.put(forged)
        batch.set_ref("refs/heads/forged", forged_id)
        a.store.apply(batch)
        assert any(reason in p.detail for p in fsck_objects(a.store))  # fsck names it too
        LmdbStore(str(tmp_path / "hub"), durable=False).close()
        a.remote_add("origin", str(tmp_path / "hub"))
        with pytest.raises(RejectedObject, match=reason):
            a.push("origin", "forged")
    with Tract.open(str(tmp_path / "hub"), readonly=True, create=False) as hub:
        assert [b.head for b in hub.list_branches()] == [None]  # no branch arrived


def test_a_tool_set_order_has_one_spelling() -> None:
    [tool] = tool_schemas([SEARCH])
    oid = object_id(tool)
    with pytest.raises(EncodeError, match="key orders for"):
        ToolSet(tools=(oid,), order=(None, None))
    with pytest.raises(EncodeError, match="left out"):
        ToolSet(tools=(oid,), order=(None,))
    with pytest.raises(EncodeError, match="ends with"):
        ToolSet(tools=(oid,), order=((("a", "b"), None),))
    with pytest.raises(EncodeError, match="listed once"):
        ToolSet(tools=(oid,), order=((("a", "a"),),))
    with pytest.raises(EncodeError, match="list of str"):
        ToolSet(tools=(oid,), order=(((1, 2),),))
    good = ToolSet(tools=(oid,), order=(key_order(SEARCH),))
    assert decode(encode(good)) == good
    wire = good.to_wire() | {"t": "toolset", "v": 1, "order": [[[1]]]}
    from tractkv import codec

    with pytest.raises(DecodeError):
        decode(codec.dumps(wire))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=6), st.randoms(use_true_random=False))
def test_any_order_round_trips_and_only_the_order_changes_the_tool_set(
    value: dict[str, Any], rnd: Any
) -> None:
    def shuffled(v: Any) -> Any:
        if isinstance(v, dict):
            keys = list(v)
            rnd.shuffle(keys)
            return {k: shuffled(v[k]) for k in keys}
        if isinstance(v, list):
            return [shuffled(i) for i in v]
        return v

    given_order = shuffled(value)
    order = key_order(given_order)
    assert same(apply_key_order(canonical(given_order), order), given_order)
    assert same(apply_key_order(given_order, key_order(canonical(value))), canonical(value))
    schema = {"name": "t", "inputSchema": {"type": "object"}, "_meta": given_order}  # MCP keeps _meta
    [tool] = tool_schemas([schema])
    assert object_id(tool) == object_id(ToolSchema(name="t", schema=canonical(schema)))
    with Tract.open() as t:
        t.set_tools([schema])
        t.user("hi")
        assert same(t.compile().tools[0], schema)


def test_merging_two_orders_of_one_tool_set_is_a_tools_conflict_settled_by_the_strategy() -> None:
    other = reordered(SEARCH)
    with tract_with([]) as t:
        t.branch("side")  # and switch to it
        t.set_tools([other])
        t.user("theirs")
        t.switch("main")
        t.set_tools([SEARCH])
        t.user("ours")
        with pytest.raises(MergeConflict):
            t.merge("side")
        t.merge("side", strategy="theirs")
        assert same(t.compile().tools, (other,))


def _format_of(path: str) -> bytes:
    env = lmdb.open(path, max_dbs=32, subdir=True)
    with env.begin() as txn:
        found = txn.get(b"format", db=env.open_db(b"meta", txn=txn))
    env.close()
    assert found is not None
    return bytes(found)


def _as_format_2(path: str) -> None:
    env = lmdb.open(path, max_dbs=32, subdir=True)
    with env.begin(write=True) as txn:
        txn.put(b"format", b"2", db=env.open_db(b"meta", txn=txn))
    env.close()


def test_a_format_2_store_compiles_as_before_and_migrates_on_a_writing_open(tmp_path: Path) -> None:
    """The golden objects (tests/store/test_golden_and_codec.py) as a format-2 store left them: its tool set
    has no order, compiles in canonical order, is read as it is read-only and migrated by a writing open."""
    # loaded by path: pytest's rootdir import mode puts tests/ on sys.path, not the repository (no `tests.` package)
    spec = importlib.util.spec_from_file_location(
        "golden_and_codec", Path(__file__).parents[1] / "store" / "test_golden_and_codec.py"
    )
    assert spec is not None
    assert spec.loader is not None
    golden = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(golden)
    BLOB, COMMIT, TOOL, TOOLSET = golden.BLOB, golden.COMMIT, golden.TOOL, golden.TOOLSET  # noqa: N806

    path = str(tmp_path / "old")
    with LmdbStore(path, durable=False) as st:
        batch = st.new_batch()
        for obj in (BLOB, TOOL, TOOLSET, COMMIT):
            batch.put(obj)
        batch.set_ref("refs/heads/main", object_id(COMMIT))
        st.apply(batch)
    _as_format_2(path)
    assert STORE_FORMAT == 4
    with Tract.open(path, readonly=True, create=False) as t:
        ctx = t.compile()
        assert same(ctx.tools, (TOOL.schema,))
        assert same(ctx.tools[0], canonical(TOOL.schema))
        before = ctx.to_openai_params()
    assert _format_of(path) == b"2"  # read as it is: nothing written
    with Tract.open(path, durable=False) as t:
        assert same(t.compile().to_openai_params(), before)
        t.user("more")
        assert same(t.compile().tools, (TOOL.schema,))
    assert _format_of(path) == b"4"
    with LmdbStore(path, durable=False, create=False) as st:
        assert fsck(st).ok


def test_set_tools_still_refuses_two_tools_of_one_name_in_any_order() -> None:
    with Tract.open() as t, pytest.raises(InvalidInput, match="two tools"):
        t.set_tools([SEARCH, reordered(SEARCH)])
