"""``tractkv grep``, ``blame`` and ``diff``'s tool changes (issue 34 items 3 and 4), text and --json, and
fsck of the search index."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tractkv import Tract
from tractkv.cli import cli
from tractkv.engine import search as search_mod
from tractkv.engine.search import CHUNK_PREFIX
from tractkv.store import Table, open_store

WEATHER = {
    "name": "get_weather",
    "description": "weather",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def run(store: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", store, *args])
    return result.exit_code, result.stdout, result.stderr


def ok(store: str, *args: str) -> str:
    code, out, err = run(store, *args)
    assert code == 0, err
    return out


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, dict[str, str]]:
    search_mod.clear_caches()
    path = str(tmp_path / "s")
    with Tract.open(path, durable=False) as t:
        t.system("You are helpful")
        t.set_tools([WEATHER])
        q = t.user("where did we decide the snow thing?", message="asked on Monday")
        call = t.assistant(tool_calls=[{"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}])
        result = t.tool_result("c1", "get_weather", "-3C, snow")
        edit = t.commit({"type": "dialogue", "role": "user", "text": "the SNOW plan?"}, "edit", q.commit_id)
        pin = t.annotate(q.commit_id, "pinned")
        t.set_tools([{**WEATHER, "description": "weather in a city"}])
        answer = t.assistant("No snow tyres.")
        ids = {"q": q.commit_id, "call": call.commit_id, "result": result.commit_id, "edit": edit.commit_id}
        ids |= {"pin": pin.commit_id, "answer": answer.commit_id}
    return path, ids


def test_grep_text(store: tuple[str, dict[str, str]]) -> None:
    path, ids = store
    out = ok(path, "grep", "snow")
    assert out.splitlines() == [
        f"{ids['answer'][:12]} assistant text: No snow tyres.",
        f"{ids['result'][:12]} tool tool_result(get_weather): -3C, snow",
        f"{ids['q'][:12]} user text: where did we decide the snow thing?",
    ]
    assert ok(path, "grep", "-i", "--role", "user", "SNOW").splitlines()[0].startswith(ids["edit"][:12])
    assert ok(path, "grep", "--tool", "get_weather", "Oslo").splitlines() == [
        f'{ids["call"][:12]} assistant arguments(get_weather): {{"city":"Oslo"}}'
    ]
    assert ok(path, "grep", "-E", "--", r"-\d+C").splitlines() == [
        f"{ids['result'][:12]} tool tool_result(get_weather): -3C, snow"
    ]
    assert len(ok(path, "grep", "-n", "1", "snow").splitlines()) == 1
    assert ok(path, "grep", "snow", ids["result"]).count("\n") == 2  # REV: the history up to it
    assert ok(path, "grep", "--after", ids["result"], "snow").count("\n") == 1
    assert ok(path, "grep", "Monday").startswith(f"{ids['q'][:12]} user note: asked on Monday")


def test_grep_json(store: tuple[str, dict[str, str]]) -> None:
    path, ids = store
    hits = json.loads(ok(path, "grep", "--json", "-i", "snow", "--context"))
    assert [(h["commit_id"], h["field"]) for h in hits] == [
        (ids["answer"], "text"),
        (ids["result"], "tool_result"),
        (ids["q"], "text"),  # the message compile shows, under its own id, with the edit's text
    ]
    last = hits[-1]
    assert last["snippet"][last["start"] : last["end"]] == "SNOW"
    assert set(last) == {
        "commit_id", "operation", "role", "tool", "field", "snippet", "start", "end", "offset", "created_at"
    }  # fmt: skip


def test_grep_no_match_and_bad_pattern(store: tuple[str, dict[str, str]]) -> None:
    path, _ = store
    code, out, err = run(path, "grep", "nothing like it")
    assert (code, out, err) == (1, "", "")  # as git grep: exit 1, nothing printed
    code, out, _ = run(path, "grep", "--json", "nothing like it")
    assert (code, json.loads(out)) == (1, [])
    code, out, err = run(path, "grep", "-E", "(unclosed")
    assert code == 1
    assert out == ""
    assert (
        err
        == "Error: search: invalid regular expression '(unclosed': missing ), unterminated subpattern at position 0\n"
    )
    code, _, err = run(path, "grep", "--role", "robot", "x")
    assert code == 2
    assert "robot" in err


def test_grep_saves_the_index_and_fsck_checks_and_repairs_it(store: tuple[str, dict[str, str]]) -> None:
    path, _ = store
    ok(path, "grep", "snow")
    with open_store(path, create=False) as s:
        rows = [k for k, _ in s.table_iter(Table.DERIVED) if k.startswith((b"grep:", b"gchunk:"))]
        assert len(rows) == 2
        chunk = next(k for k in rows if k.startswith(CHUNK_PREFIX))
        batch = s.new_batch()
        batch.table_put(Table.DERIVED, chunk, b"\x80")  # an empty CBOR list, not what the key hashes
        s.apply(batch)
    report = json.loads(run(path, "fsck", "--json")[1])
    assert not report["ok"]
    assert report["search_index_rows"] == 2
    assert any(p["kind"] == "search index" and "hash" in p["detail"] for p in report["problems"])
    code, out, err = run(path, "fsck", "--repair")
    assert code == 0, err
    assert out.startswith("dropped search chunk ")
    assert run(path, "fsck")[0] == 0
    search_mod.clear_caches()
    assert ok(path, "grep", "-i", "snow").count("\n") == 4


def test_blame_text_and_json(store: tuple[str, dict[str, str]]) -> None:
    path, ids = store
    lines = ok(path, "blame").splitlines()
    assert len(lines) == 5
    assert lines[1].split()[:4] == ["1", ids["q"][:12], "user", "append"]
    assert lines[1].endswith(
        f"the SNOW plan?  (edited by {ids['edit'][:12]}; annotated by {ids['pin'][:12]})"
    )
    assert lines[2].endswith("[calls get_weather]")
    entries = json.loads(ok(path, "blame", "--json"))
    assert [e["commit_id"] for e in entries][1:] == [ids["q"], ids["call"], ids["result"], ids["answer"]]
    assert entries[1]["shown"] == ids["edit"]
    assert entries[1]["edits"] == [ids["edit"]]
    assert entries[1]["annotations"] == [ids["pin"]]
    assert len(json.loads(ok(path, "blame", "--json", ids["call"]))) == 3  # at a revision


def test_diff_shows_tool_changes(store: tuple[str, dict[str, str]]) -> None:
    path, ids = store
    out = ok(path, "diff", ids["pin"])
    assert out.splitlines()[-1] == "~ tool get_weather (description)"
    data = json.loads(ok(path, "diff", "--json", ids["pin"]))
    assert data["tools"] == [
        {
            "change": "changed",
            "name": "get_weather",
            "before": WEATHER,
            "after": {**WEATHER, "description": "weather in a city"},
        }
    ]
    back = ok(path, "diff", "HEAD", ids["q"])
    assert "- tool get_weather" not in back  # the tool set was there at q too: changed, not removed
    assert back.splitlines()[-1] == "~ tool get_weather (description)"


@pytest.fixture
def read_only(store: tuple[str, dict[str, str]], tmp_path: Path) -> Iterator[str]:
    """The store, seen through a path this process cannot write: its files chmod'ed read-only, or (as root,
    whom permissions do not stop) a read-only bind mount of it; skipped when neither is possible."""
    path = Path(store[0])
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [path, *path.iterdir()]}
        for p in modes:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield str(path)
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    mount = tmp_path / "ro"
    mount.mkdir()
    bind = subprocess.run(["mount", "--bind", str(path), str(mount)], capture_output=True, check=False)
    if bind.returncode != 0:
        pytest.skip(f"root without a bind mount: {bind.stderr.decode().strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(mount)], capture_output=True, check=False)
        if ro.returncode != 0:
            pytest.skip(f"root cannot remount read-only: {ro.stderr.decode().strip()}")
        yield str(mount)
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, check=False)


def test_grep_and_blame_read_a_store_they_cannot_write(
    store: tuple[str, dict[str, str]], read_only: str
) -> None:
    """grep falls back to a read-only open and the in-memory index: the same hits as on the writable store,
    and nothing written (the writable store's grep, after, still builds and saves its index)."""
    path, _ = store
    args = ("grep", "--json", "-i", "snow")
    seen = json.loads(ok(read_only, *args))
    assert json.loads(ok(read_only, "grep", "--json", "-i", "snow", "--context")) == json.loads(
        ok(path, "grep", "--json", "-i", "snow", "--context")
    )
    assert seen == json.loads(ok(path, *args))
    assert json.loads(ok(read_only, "blame", "--json")) == json.loads(ok(path, "blame", "--json"))
    assert ok(read_only, "log") == ok(path, "log")
