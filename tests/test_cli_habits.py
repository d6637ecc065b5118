"""Git's CLI habits (issue 34, item 5): `-h`, `log --oneline`, `checkout -b`, values starting with '-' after
`--`, flags named in errors, a usage id prefix, readable times in `cat-object`, both sides of an edit in `diff`.
`--store` / `-C` before or after every command: tests/test_cli_no_store.py (over the whole command tree)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tractkv.cli import cli


def run(store: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", store, *args])
    return result.exit_code, result.stdout, result.stderr


def ok(store: str, *args: str) -> str:
    code, out, err = run(store, *args)
    assert code == 0, err
    return out


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "s.tkv")
    ok(path, "init")
    return path


def test_dash_h_is_help() -> None:
    runner = CliRunner()
    for path in ([], ["log"], ["usage", "rerun"], ["remote", "add"]):
        short, long = runner.invoke(cli, [*path, "-h"]), runner.invoke(cli, [*path, "--help"])
        assert short.exit_code == long.exit_code == 0
        assert short.stdout == long.stdout
        assert "-h, --help" in short.stdout


def test_log_oneline(store: str) -> None:
    first = ok(store, "commit", "one").strip()
    second = ok(store, "commit", "two").strip()
    text = ok(store, "log", "--oneline")
    assert text.splitlines() == [f"{second[:12]} append user: two", f"{first[:12]} append user: one"]
    assert text == ok(store, "log")
    assert ok(store, "log", "--oneline", "--graph").splitlines()[0] == f"* {second[:12]} append user: two"
    assert [c["commit_id"] for c in json.loads(ok(store, "log", "--json"))] == [second, first]
    code, _, err = run(store, "log", "--oneline", "--json")
    assert code == 2
    assert "--oneline is a text format" in err


def test_checkout_b_creates_and_switches(store: str) -> None:
    first = ok(store, "commit", "one").strip()
    second = ok(store, "commit", "two").strip()
    assert ok(store, "checkout", "-b", "feature").strip() == second
    status = json.loads(ok(store, "status", "--json"))
    assert (status["branch"], status["head"]) == ("feature", second)
    assert ok(store, "checkout", "-b", "old", first).strip() == first  # at a start revision
    status = json.loads(ok(store, "status", "--json"))
    assert (status["branch"], status["head"], status["detached"]) == ("old", first, False)
    assert ok(store, "status").startswith("on branch old")
    code, _, err = run(store, "checkout", "-b", "old")
    assert code == 1
    assert "exists" in err
    code, _, err = run(store, "checkout")
    assert code == 2
    assert "-b NAME" in err


def test_a_value_starting_with_a_dash_goes_after_double_dash(store: str) -> None:
    call = json.dumps({"id": "c1", "name": "weather", "arguments": {"city": "Oslo"}})
    ok(store, "commit", "weather in Oslo?")
    ok(store, "commit", "--tool-call", call)
    code, out, err = run(store, "commit", "--tool-call-id", "c1", "-3C, snow")
    assert code == 2
    assert out == ""
    assert "No such option '-3'" in err
    assert "`--`" in err
    assert "commit [OPTIONS] -- VALUE" in err
    made = json.loads(ok(store, "commit", "--tool-call-id", "c1", "--json", "--", "-3C, snow"))
    assert made["operation"] == "append"
    messages = json.loads(ok(store, "compile", "--json"))["messages"]
    assert (messages[-1]["role"], messages[-1]["content"]) == ("tool", "-3C, snow")
    assert "-3C, snow" in ok(store, "compile", "--format", "text")


def test_compile_max_tokens_errors_name_the_flag(store: str) -> None:
    ok(store, "commit", "--role", "system", "You are a careful assistant who answers in full sentences.")
    code, out, err = run(store, "compile", "--max-tokens", "5")
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert "--max-tokens 5" in err
    assert "max_tokens=" not in err
    assert "raise --max-tokens" in err
    code, out, err = run(store, "compile", "--max-tokens", "5", "--format", "openai")
    assert code == 1
    assert "--max-tokens 5" in err


def test_cat_object_prints_times_as_utc(store: str) -> None:
    oid = ok(store, "commit", "hello").strip()
    info = json.loads(ok(store, "show", oid, "--json"))
    data = json.loads(ok(store, "cat-object", oid, "--json"))
    assert isinstance(data["created_at"], int)  # the stored µs, as before
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z", data["created_at_utc"])
    assert data["created_at_utc"].replace("Z", "+00:00") == info["created_at"]
    text = ok(store, "cat-object", oid[:8])
    assert f"created_at: {data['created_at_utc']}\n" in text
    assert str(data["created_at"]) not in text


def test_diff_text_shows_both_sides_of_an_edit(store: str) -> None:
    first = ok(store, "commit", "the meeting is on Monday").strip()
    base = ok(store, "commit", "noted").strip()
    ok(store, "commit", "--edit", first, "the meeting is on Tuesday")
    ok(store, "commit", "and bring slides")
    text = ok(store, "diff", base)
    assert text.splitlines() == [
        f"~ {first[:12]}",
        "  - [user] the meeting is on Monday",
        "  + [user] the meeting is on Tuesday",
        "+ " + text.splitlines()[3][2:14] + " [user] and bring slides",
    ]
    entries = json.loads(ok(store, "diff", base, "--json"))["entries"]
    assert [(e["change"], (e["before"] or {}).get("content"), e["after"]["content"]) for e in entries] == [
        ("modified", "the meeting is on Monday", "the meeting is on Tuesday"),
        ("added", None, "and bring slides"),
    ]
    removed = ok(store, "diff", "HEAD", base)  # the other way round: the edit reversed, the message removed
    assert "  - [user] the meeting is on Tuesday" in removed
    assert "  + [user] the meeting is on Monday" in removed
    assert any(
        line.startswith("- ") and line.endswith("[user] and bring slides") for line in removed.splitlines()
    )
