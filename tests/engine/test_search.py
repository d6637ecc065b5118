"""Search over history and context (issue 34 item 3): what is matched, filters, the index in the derived
table (stored, extended, verified, checked by fsck, dropped by gc, not synced), and a property against a
brute-force scan of every commit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tractkv import SearchHit, Tract, codec
from tractkv.engine import search as search_mod
from tractkv.engine.search import CHUNK_PREFIX, TIP_PREFIX, check_index
from tractkv.engine.search_chunks import decode, encode
from tractkv.errors import DecodeError, InvalidInput, UnknownRevision
from tractkv.ids import hash_bytes
from tractkv.store import MemoryStore, Table

WEATHER = {
    "name": "get_weather",
    "description": "weather",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    search_mod.clear_caches()  # each test sees its own store's index, not one this process built before


def _history(t: Tract) -> dict[str, Any]:
    t.system("You are helpful")
    t.set_tools([WEATHER])
    question = t.user("where did we decide the snow thing?", message="asked on Monday")
    call = t.assistant(tool_calls=[{"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}])
    result = t.tool_result("c1", "get_weather", "-3C, snow", metadata={"source": "met.no"})
    note = t.annotate(question.commit_id, "pinned", reason="the snow decision")
    edit = t.commit(
        {"type": "dialogue", "role": "user", "text": "where did we decide the SNOW plan?"},
        operation="edit",
        edit_target=question.commit_id,
    )
    answer = t.assistant("We decided: no snow tyres.")
    return {"q": question, "call": call, "result": result, "note": note, "edit": edit, "answer": answer}


def _where(hits: list[SearchHit]) -> list[tuple[str, str]]:
    return [(h.commit_id, h.field) for h in hits]


def test_every_field_is_searched_newest_first(tract: Tract) -> None:
    c = _history(tract)
    hits = tract.search("snow")
    assert _where(hits) == [
        (c["answer"].commit_id, "text"),
        (c["note"].commit_id, "reason"),
        (c["result"].commit_id, "tool_result"),
        (c["q"].commit_id, "text"),
    ]
    first = hits[-1]
    assert first.role == "user"
    assert first.operation == "append"
    assert first.match == "snow"
    assert first.snippet[first.start : first.end] == "snow"
    assert first.offset == "where did we decide the snow thing?".index("snow")
    assert _where(tract.search("Oslo")) == [(c["call"].commit_id, "arguments")]
    assert [(h.field, h.tool) for h in tract.search("get_weather")] == [("tool_name", "get_weather")]
    assert _where(tract.search("met.no")) == [(c["result"].commit_id, "metadata")]
    assert _where(tract.search("Monday")) == [(c["q"].commit_id, "note")]


def test_case_regex_role_tool_after_limit(tract: Tract) -> None:
    c = _history(tract)
    assert [h.commit_id for h in tract.search("SNOW")] == [c["edit"].commit_id]
    assert len(tract.search("SNOW", ignore_case=True)) == 5
    assert [h.match for h in tract.search(r"-\d+C", regex=True)] == ["-3C"]
    assert tract.search(r"-\d+C") == []  # a literal by default
    assert [h.commit_id for h in tract.search("snow", ignore_case=True, role="user")] == [
        c["edit"].commit_id,
        c["q"].commit_id,
    ]
    assert _where(tract.search("o", tool="get_weather")) == [
        (c["result"].commit_id, "tool_result"),
        (c["call"].commit_id, "arguments"),
    ]
    after = tract.search("snow", ignore_case=True, after=c["result"].commit_id)
    assert {h.commit_id for h in after} == {c["note"].commit_id, c["edit"].commit_id, c["answer"].commit_id}
    assert len(tract.search("snow", limit=2)) == 2
    assert tract.search("snow", limit=0) == []


def test_anchors_keep_their_meaning_within_one_field(tract: Tract) -> None:
    tract.user("alpha")
    tract.user("beta\ngamma")
    assert [h.match for h in tract.search("^gamma", regex=True)] == []
    assert [h.match for h in tract.search("(?m)^gamma", regex=True)] == ["gamma"]
    assert [h.match for h in tract.search("alpha$", regex=True)] == ["alpha"]
    assert tract.search("alpha\x00beta") == []  # never across two fields


def test_context_scope_searches_what_compile_sends(tract: Tract) -> None:
    c = _history(tract)
    ctx_hits = tract.search("snow", ignore_case=True, scope="context")
    # the edited question is found under its original id, with the edit's text; the annotation is no message
    assert _where(ctx_hits) == [
        (c["answer"].commit_id, "text"),
        (c["result"].commit_id, "tool_result"),
        (c["q"].commit_id, "text"),
    ]
    assert "SNOW plan" in ctx_hits[-1].snippet
    tract.compress(content="a summary")  # the messages become one summary: history still finds them
    assert tract.search("Oslo", scope="context") == []
    assert len(tract.search("Oslo")) == 1


def test_bad_input_is_invalid_input(tract: Tract) -> None:
    tract.user("x")
    with pytest.raises(InvalidInput, match=r"invalid regular expression '\(': missing \)"):
        tract.search("(", regex=True)
    with pytest.raises(InvalidInput, match="empty"):
        tract.search("")
    with pytest.raises(InvalidInput, match="scope"):
        tract.search("x", scope="everything")
    with pytest.raises(InvalidInput, match="limit"):
        tract.search("x", limit=-1)
    with pytest.raises(UnknownRevision):
        tract.search("x", branch="nope")


def test_branch_and_merged_history(tract: Tract) -> None:
    tract.user("on main")
    tract.branch("side")
    side = tract.user("only on side")
    tract.switch("main")
    assert tract.search("side") == []
    assert [h.commit_id for h in tract.search("side", branch="side")] == [side.commit_id]
    tract.merge("side")
    assert [h.commit_id for h in tract.search("only on side")] == [side.commit_id]


def _index_rows(t: Tract) -> dict[bytes, bytes]:
    return {k: v for k, v in t.store.table_iter(Table.DERIVED) if k.startswith((TIP_PREFIX, CHUNK_PREFIX))}


def test_the_index_is_stored_extended_and_replaced(tmp_path: Path) -> None:
    t = Tract.open(str(tmp_path / "s"), durable=False)
    for i in range(1500):
        t.user(f"message {i}")
    assert len(t.search("message 7")) == 111  # 7, 70-79, 700-799
    rows = _index_rows(t)
    tips = [k for k in rows if k.startswith(TIP_PREFIX)]
    assert len(tips) == 1
    assert len(rows) == 3
    full = next(k for k, v in rows.items() if k.startswith(CHUNK_PREFIX) and codec.loads(v)["n"] == 1024)
    t.user("message 7 again")
    search_mod.clear_caches()  # as a new process would: the stored record is read and extended
    assert len(t.search("message 7")) == 112
    rows2 = _index_rows(t)
    assert full in rows2  # the full chunk is shared
    assert len([k for k in rows2 if k.startswith(TIP_PREFIX)]) == 1  # the old tip's record was replaced
    assert len(rows2) == 3  # and its last chunk dropped
    problems, damaged, checked = check_index(t.store)
    assert (problems, damaged, checked) == ([], [], 3)
    t.close()


def test_a_read_only_handle_keeps_the_index_in_memory(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    with Tract.open(path, durable=False) as t:
        t.user("hello world")
    with Tract.open(path, readonly=True) as r:
        assert len(r.search("world")) == 1
        assert _index_rows(r) == {}


def test_damage_is_found_by_fsck_and_never_trusted_by_search(tmp_path: Path) -> None:
    t = Tract.open(str(tmp_path / "s"), durable=False)
    t.user("alpha")
    t.user("beta")
    t.search("alpha")
    key = next(k for k in _index_rows(t) if k.startswith(CHUNK_PREFIX))
    raw = t.store.table_get(Table.DERIVED, key)
    assert raw is not None
    batch = t.store.new_batch()
    assert b"alpha" in raw
    batch.table_put(Table.DERIVED, key, raw.replace(b"alpha", b"gamma"))
    t.store.apply(batch)
    problems, damaged, _ = check_index(t.store)
    assert key in damaged
    assert "hash" in problems[0].detail
    search_mod.clear_caches()
    assert [h.match for h in t.search("alpha")] == ["alpha"]  # not trusted: rebuilt from objects
    assert t.search("gamma") == []
    t.close()


def test_fsck_checks_entries_against_the_commits(tmp_path: Path) -> None:
    """A chunk whose bytes hash to its key but whose entries are not what its commits hold is damage."""
    t = Tract.open(str(tmp_path / "s"), durable=False)
    t.user("alpha")
    t.search("alpha")
    rows = _index_rows(t)
    key = next(k for k in rows if k.startswith(CHUNK_PREFIX))
    records = decode(key, rows[key]).records()
    records[0][4][0][2] = "forged"
    forged_key, forged, _ = encode(records)
    batch = t.store.new_batch()
    batch.table_put(Table.DERIVED, forged_key, forged)
    t.store.apply(batch)
    problems, damaged, _ = check_index(t.store)
    assert damaged == [forged_key]
    assert "not what that commit holds" in problems[0].detail
    t.close()


def test_gc_drops_rows_of_removed_tips_and_unused_chunks(tmp_path: Path) -> None:
    t = Tract.open(str(tmp_path / "s"), durable=False)
    t.user("keep")
    t.branch("gone")
    t.user("throwaway")
    t.search("throwaway")
    t.switch("main")
    t.delete_branch("gone", force=True)
    t.search("keep")
    assert len([k for k in _index_rows(t) if k.startswith(TIP_PREFIX)]) == 2
    t.gc(min_age_hours=0)
    rows = _index_rows(t)
    assert len([k for k in rows if k.startswith(TIP_PREFIX)]) == 1
    assert check_index(t.store)[1] == []
    t.close()


def test_the_index_is_not_synced(tmp_path: Path) -> None:
    src = str(tmp_path / "src")
    with Tract.open(src, durable=False) as t:
        t.user("hello")
        t.search("hello")
        assert _index_rows(t)
    with Tract.clone(src, str(tmp_path / "dst")) as c:
        assert _index_rows(c) == {}
        assert len(c.search("hello")) == 1


# --- the property: a literal finds exactly the commits a brute-force scan finds ------------------------------

_TEXT = st.text(alphabet="ab \nA", min_size=1, max_size=12)
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), _TEXT, st.none() | _TEXT | st.just("=")),  # "=": the note repeats the text
        st.tuples(st.just("assistant"), _TEXT, st.none()),
        st.tuples(st.just("call"), _TEXT, st.none()),
        st.tuples(st.just("edit"), _TEXT, st.none()),
        st.tuples(st.just("search"), _TEXT, st.none()),
        st.tuples(st.just("side"), _TEXT, st.none()),
    ),
    min_size=1,
    max_size=25,
)


def _brute(t: Tract, needle: str, fold: bool) -> set[tuple[str, str]]:
    """(commit, field) of every commit reachable from HEAD whose text, call, result or note holds ``needle``,
    read from the log (not from the index)."""
    want = needle.lower() if fold else needle
    out: set[tuple[str, str]] = set()

    def check(oid: str, field: str, text: str | None) -> None:
        if text and want in (text.lower() if fold else text):
            out.add((oid, field))

    for info in t.log():
        data = info.content if isinstance(info.content, dict) else {}
        text = data.get("text")
        check(info.commit_id, "tool_result" if info.role == "tool" else "text", text)
        for call in data.get("tool_calls") or ():
            check(info.commit_id, "tool_name", call["name"])
        check(info.commit_id, "note", info.message)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS, needle=st.text(alphabet="ab \nA", min_size=1, max_size=3), fold=st.booleans())
def test_a_literal_finds_what_a_brute_force_scan_finds(
    ops: list[tuple[str, str, str | None]], needle: str, fold: bool
) -> None:
    search_mod.clear_caches()
    t = Tract(MemoryStore(), owns_store=True)
    calls = sides = 0
    for kind, text, note in ops:
        if kind == "user":
            t.user(text, message=text if note == "=" else note)
        elif kind == "assistant":
            t.assistant(text)
        elif kind == "call":
            calls += 1
            name = "t" + "".join(ch for ch in text if ch in "abA")
            t.assistant(tool_calls=[{"id": f"c{calls}", "name": name, "arguments": {}}])
            t.tool_result(f"c{calls}", None, text)
        elif kind == "edit" and t.head is not None:
            last = t.log(limit=1)[0]
            if last.role == "user" and last.operation == "append":
                t.commit({"type": "dialogue", "role": "user", "text": text}, "edit", last.commit_id)
        elif kind == "search" and t.head is not None:
            t.search("a")  # an index mid-way: later searches extend it
        elif kind == "side" and t.head is not None:
            sides += 1
            t.branch(f"side{sides}")
            t.user(text)
            t.switch("main")
            t.user("main " + text)
            t.merge(f"side{sides}")
    if t.head is None:
        return
    fields = {"text", "tool_result", "tool_name", "note"}
    found = {(h.commit_id, h.field) for h in t.search(needle, ignore_case=fold) if h.field in fields}
    assert found == _brute(t, needle, fold)
    as_regex = t.search(re.escape(needle), regex=True, ignore_case=fold)
    assert [(h.commit_id, h.field, h.offset) for h in as_regex] == [
        (h.commit_id, h.field, h.offset) for h in t.search(needle, ignore_case=fold)
    ]
    search_mod.clear_caches()  # a fresh process: the whole history built at once gives the same hits
    assert {(h.commit_id, h.field) for h in t.search(needle, ignore_case=fold) if h.field in fields} == found


def test_hits_as_json(tract: Tract) -> None:
    from tractkv.model import to_jsonable

    tract.user("hello")
    (hit,) = to_jsonable(tract.search("ell"))
    assert hit["field"] == "text"
    assert hit["start"] == 1
    assert hit["end"] == 4
    assert hit["snippet"] == "hello"


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("op", b"\x09\x00"),  # an operation index past the table
        ("f_rec", b"\x05\x00"),  # a field of a commit the chunk does not hold
        ("f_start", b"\xff\x00\x00\x00"),  # a field starting past the text
        ("ids", b"\x00" * 31),  # an id of 31 bytes
        ("f_kind", b"\x40"),  # a field kind past FIELDS
    ],
)
def test_a_hostile_chunk_whose_hash_is_right_is_refused(column: str, value: bytes) -> None:
    """A row that hashes to its key but holds columns out of range: refused on load (a rebuild), never a
    failure while searching."""
    _, raw, _ = encode([[b"\x01" * 32, 1, "append", "user", [["text", None, "hello"]]]])
    columns = codec.loads(raw)
    columns[column] = value
    bad = codec.dumps_local(columns)
    key = CHUNK_PREFIX + bytes.fromhex(hash_bytes(bad))
    with pytest.raises(DecodeError, match="search index chunk"):
        decode(key, bad)
