"""The engine commands end to end: CliRunner for every command, real subprocesses for the README's main job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tractkv import Tract
from tractkv.cli import cli
from tractkv.cli.engine_cmds import graph_lines
from tractkv.store import fsck, open_store


def run(store: str, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", store, *args], input=input)
    return result.exit_code, result.stdout, result.stderr


def ok(store: str, *args: str, input: str | None = None) -> str:
    code, out, err = run(store, *args, input=input)
    assert code == 0, err
    return out


def snapshot(store: str) -> tuple[dict[str, str], int]:
    """Refs and object count: what a failed command must leave unchanged."""
    with open_store(store, create=False) as s:
        report = fsck(s)
        assert report.ok, report.problems
        return dict(s.iter_refs()), s.count_objects()


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "s.tkv")
    ok(path, "init")
    return path


def test_compile_a_context_with_parts(store: str) -> None:
    """JSON output carries media bytes as {"$bytes": base64} (as export does); text shows part markers."""
    import base64

    from tractkv.model import to_jsonable

    sys.path.insert(0, str(Path(__file__).parent / "engine"))
    from media_files import pdf, png

    image, document = png(4, 3), pdf(1)
    with Tract.open(store) as t:
        t.user(
            [
                "look",
                {"type": "image", "data": image, "media_type": "image/png"},
                {"type": "document", "data": document, "media_type": "application/pdf", "title": "Q3"},
            ]
        )
        expected = t.compile().to_dicts()
        openai = t.compile().to_openai_params()
    as_json = json.loads(ok(store, "compile"))
    assert as_json["messages"] == to_jsonable(expected)
    part = as_json["messages"][0]["parts"][1]
    assert base64.b64decode(part["data"]["$bytes"]) == image
    assert json.loads(ok(store, "compile", "--format", "openai")) == openai
    text = ok(store, "compile", "--format", "text")
    assert "look [image image/png" in text
    assert "[document application/pdf" in text
    assert '"Q3"]' in text


def test_commit_and_compile_match_the_library(store: str) -> None:
    system = ok(store, "commit", "--role", "system", "Be brief.").strip()
    user = ok(store, "commit", "Hello", "--metadata", '{"lang": "en"}').strip()
    piped = ok(store, "commit", "--role", "assistant", "-", input="Hi from stdin\n").strip()
    with Tract.open(store) as t:
        assert [c.commit_id for c in t.log()] == [piped, user, system]
        assert t.get_commit(user).metadata == {"lang": "en"}
        expected_openai = t.compile().to_openai_params()
        expected_anthropic = t.compile().to_anthropic_params()
        expected_dicts = t.compile().to_dicts()
    assert json.loads(ok(store, "compile", "--format", "openai")) == expected_openai
    assert json.loads(ok(store, "compile", "--format", "anthropic")) == expected_anthropic
    as_json = json.loads(ok(store, "compile", "--json"))
    assert as_json["messages"] == expected_dicts
    assert as_json["commit_ids"] == [system, user, piped]
    text = ok(store, "compile", "--format", "text")
    assert "[assistant]" in text
    assert "Hi from stdin" in text
    # --json keeps a JSON format as it is, and turns text into json
    assert json.loads(ok(store, "compile", "--format", "anthropic", "--json")) == expected_anthropic
    assert json.loads(ok(store, "compile", "--format", "text", "--json"))["messages"] == expected_dicts
    earlier = json.loads(ok(store, "compile", "--format", "openai", "--at", user))
    assert [m["content"] for m in earlier["messages"]] == ["Be brief.", "Hello"]


def test_edit_and_other_content_types(store: str) -> None:
    first = ok(store, "commit", "Helo").strip()
    ok(store, "commit", "--edit", first, "Hello")
    ok(store, "commit", "--type", "reasoning", "--role", "assistant", "thinking...")
    ok(store, "commit", "--type", "freeform", '{"k": [1, 2]}')
    msgs = json.loads(ok(store, "compile", "--json"))["messages"]
    assert [m["content"] for m in msgs] == ["Hello", '{"k":[1,2]}']
    ops = [c["operation"] for c in json.loads(ok(store, "log", "--json"))]
    assert ops == ["append", "append", "edit", "append"]
    assert len(json.loads(ok(store, "log", "--json", "--op", "edit"))) == 1
    assert len(json.loads(ok(store, "log", "--json", "--limit", "2"))) == 2


def test_show_status_and_log_text(store: str) -> None:
    oid = ok(store, "commit", "Hello there").strip()
    shown = json.loads(ok(store, "show", oid[:10], "--json"))
    assert shown["commit_id"] == oid
    assert shown["content"]["text"] == "Hello there"
    assert f"commit     {oid}" in ok(store, "show")
    status = json.loads(ok(store, "status", "--json"))
    assert status["branch"] == "main"
    assert status["head"] == oid
    assert status["commit_count"] == 1
    assert status["message_count"] == 1
    assert "on branch main" in ok(store, "status")
    assert ok(store, "log").startswith(f"{oid[:12]} append user: Hello there")


def test_branch_switch_merge_graph_and_reflog(store: str) -> None:
    base = ok(store, "commit", "base").strip()
    created = json.loads(ok(store, "branch", "exp", "--json"))
    assert created["name"] == "exp"
    assert created["head"] == base
    assert json.loads(ok(store, "status", "--json"))["branch"] == "main"  # branch does not switch
    ok(store, "switch", "exp")
    theirs = ok(store, "commit", "on exp").strip()
    ok(store, "switch", "main")
    ours = ok(store, "commit", "on main").strip()
    merged = json.loads(ok(store, "merge", "exp", "--json"))
    assert merged["kind"] == "merge"
    msgs = [m["content"] for m in json.loads(ok(store, "compile", "--json"))["messages"]]
    assert msgs == ["base", "on main", "on exp"]
    branches = json.loads(ok(store, "branch", "--json"))
    assert {b["name"]: b["is_current"] for b in branches} == {"exp": False, "main": True}
    graph = ok(store, "log", "--graph").splitlines()
    assert graph[0].startswith("* ")
    assert graph[1] == "|\\"
    assert any(line.startswith("| * " + theirs[:12]) for line in graph)
    assert any(line.startswith("* | " + ours[:12]) for line in graph)
    assert graph[-1].startswith("* " + base[:12])
    moves = json.loads(ok(store, "reflog", "--json"))
    assert moves[0]["new"] == merged["head"]
    assert [m["operation"] for m in moves][-1] == "append"
    ok(store, "switch", "-c", "other")
    assert json.loads(ok(store, "status", "--json"))["branch"] == "other"
    ok(store, "switch", "main")
    code, _, err = run(store, "branch", "--delete", "other")
    assert code == 0, err
    assert "deleted branch other" in err


def test_graph_lines_for_a_linear_history_is_one_lane(store: str) -> None:
    for text in ("a", "b", "c"):
        ok(store, "commit", text)
    with Tract.open(store) as t:
        lines = graph_lines(t.log())
    assert [line[:2] for line in lines] == ["* ", "* ", "* "]


def test_merge_conflict_is_one_line_and_changes_nothing(store: str) -> None:
    target = ok(store, "commit", "draft").strip()
    ok(store, "branch", "exp")
    ok(store, "commit", "--edit", target, "ours")
    ok(store, "switch", "exp")
    ok(store, "commit", "--edit", target, "theirs")
    ok(store, "switch", "main")
    before = snapshot(store)
    code, out, err = run(store, "merge", "exp")
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("Error: 1 merge conflict(s)")
    assert snapshot(store) == before
    resolved = json.loads(ok(store, "merge", "exp", "--strategy", "theirs", "--json"))
    assert resolved["conflicts_resolved"] == 1
    assert [m["content"] for m in json.loads(ok(store, "compile", "--json"))["messages"]] == ["theirs"]


def test_reset_soft_hard_and_undo_from_the_reflog(store: str) -> None:
    first = ok(store, "commit", "one").strip()
    second = ok(store, "commit", "two").strip()
    assert ok(store, "reset", first).strip() == first
    assert json.loads(ok(store, "status", "--json"))["head"] == first
    assert ok(store, "reset", second, "--hard").strip() == second
    moves = json.loads(ok(store, "reflog", "--json"))
    assert moves[0]["hard"] is True
    assert moves[0]["old"] == first
    assert moves[1]["hard"] is False
    assert "[hard]" in ok(store, "reflog").splitlines()[0]


def test_checkout_is_read_only(store: str) -> None:
    first = ok(store, "commit", "one").strip()
    ok(store, "commit", "two")
    assert ok(store, "checkout", first[:8]).strip() == first
    assert json.loads(ok(store, "status", "--json"))["detached"] is True
    before = snapshot(store)
    code, _, err = run(store, "commit", "three")
    assert code == 1
    assert "detached" in err.lower()
    assert snapshot(store) == before


def test_diff_annotate_and_gc(store: str) -> None:
    first = ok(store, "commit", "one").strip()
    ok(store, "commit", "two")
    changes = json.loads(ok(store, "diff", first, "--json"))
    assert [e["change"] for e in changes["entries"]] == ["added"]
    assert changes["entries"][0]["after"]["content"] == "two"
    assert ok(store, "diff", first).startswith("+ ")
    ok(store, "annotate", first, "skip", "--reason", "noise")
    assert [m["content"] for m in json.loads(ok(store, "compile", "--json"))["messages"]] == ["two"]
    ok(store, "annotate", first, "pinned")
    ok(store, "commit", "abandoned")
    ok(store, "reset", "HEAD~1", "--hard")
    result = json.loads(ok(store, "gc", "--min-age-hours", "0", "--json"))
    assert result["removed_objects"] == 2  # the abandoned commit and its blob
    assert snapshot(store)[1] == result["kept_objects"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("show", "nosuch"), "unknown revision"),
        (("commit", "x", "--metadata", "{bad"), "--metadata is not valid JSON"),
        (("commit", "x", "--metadata", "[1]"), "must be a JSON object"),
        (("commit", "--type", "freeform", "not json"), "freeform content must be JSON"),
        (("commit", "x", "--edit", "0000"), "0000"),
        (("switch", "nope"), "nope"),
        (("merge", "nope"), "nope"),
        (("reset", "nope"), "nope"),
        (("annotate", "nope", "pinned"), "nope"),
        (("branch", "main"), "exists"),
        (("branch", "bad..name"), "bad..name"),
        (("diff", "nope"), "nope"),
    ],
)
def test_errors_are_one_line_and_change_nothing(store: str, args: tuple[str, ...], needle: str) -> None:
    ok(store, "commit", "hello")
    before = snapshot(store)
    code, out, err = run(store, *args)
    assert code != 0
    assert out == ""
    assert err.startswith("Error: ")
    assert err.count("\n") == 1
    assert needle in err
    assert snapshot(store) == before


@pytest.mark.slow
def test_readme_main_job_in_a_real_process(tmp_path: Path) -> None:
    env = {**os.environ, "TRACTKV_STORE": ""}
    exe = [sys.executable, "-m", "tractkv"]

    def sh(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*exe, "--store", "demo.tkv", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    assert sh("init").returncode == 0
    assert sh("commit", "--role", "user", "Hello").returncode == 0
    compiled = sh("compile", "--format", "openai")
    assert compiled.returncode == 0, compiled.stderr
    assert json.loads(compiled.stdout) == {"messages": [{"role": "user", "content": "Hello"}]}
    bad = sh("merge", "nowhere")
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()]
    assert "Traceback" not in bad.stderr


def test_compile_format_responses_and_left_out_items(store: str) -> None:
    """--format responses is to_responses_params; openai / anthropic name the Responses items they leave out."""
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    reply = {
        "id": "resp_1",
        "object": "response",
        "model": "m",
        "status": "completed",
        "error": None,
        "output": [
            search,
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Found it."}],
            },
        ],
    }
    with Tract.open(store) as t:
        t.user("Search it.")
        t.record_response(reply)
        expected = t.compile().to_responses_params()
    assert expected["input"][1] == search
    assert json.loads(ok(store, "compile", "--format", "responses")) == expected
    code, out, err = run(store, "compile", "--format", "openai")
    assert code == 0
    assert "left out: the Responses item ws_1 (web_search_call)" in err
    assert "ws_1" not in out


def test_compile_format_responses_names_reasoning_it_cannot_send(store: str) -> None:
    """A reply cut off while reasoning: --format responses leaves its reasoning item out and says so."""
    reply = {
        "id": "resp_1",
        "object": "response",
        "model": "m",
        "status": "incomplete",
        "error": None,
        "output": [{"type": "reasoning", "id": "rs_1", "summary": []}],
    }
    with Tract.open(store) as t:
        t.user("Think.")
        t.record_response(reply)
        t.user("Go on.")
    code, out, err = run(store, "compile", "--format", "responses")
    assert code == 0
    assert "left out: the Responses item rs_1 (reasoning) has no output after it" in err
    assert "rs_1" not in out
