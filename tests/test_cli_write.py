"""`tractkv commit` end to end: edits keep the target's role, tool calls and results through the library's rules,
appends that survive another writer, and stdin (cleanup, UTF-8, Ctrl-C)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tractkv import CommitInfo, Tract
from tractkv.cli import cli
from tractkv.engine.session import Session
from tractkv.errors import InvalidInput
from tractkv.store import fsck, open_store

ROOT = Path(__file__).resolve().parents[1]


def run(store: str, *args: str, input: str | bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", store, *args], input=input)
    return result.exit_code, result.stdout, result.stderr


def ok(store: str, *args: str, input: str | bytes | None = None) -> str:
    code, out, err = run(store, *args, input=input)
    assert code == 0, err
    return out.strip()


def refused(store: str, *args: str, input: str | bytes | None = None) -> str:
    """Run a command that must fail with one ``Error:`` line and change nothing; return that line."""
    before = snapshot(store)
    code, out, err = run(store, *args, input=input)
    assert code == 1, (code, out, err)
    assert out == ""
    assert err.startswith("Error: ")
    assert err.count("\n") == 1, err
    assert snapshot(store) == before
    return err.strip()


def snapshot(store: str) -> tuple[dict[str, str], int]:
    """Refs and object count: what a refused command must leave unchanged."""
    with open_store(store, create=False) as s:
        report = fsck(s)
        assert report.ok, report.problems
        return dict(s.iter_refs()), s.count_objects()


def content(store: str, rev: str) -> Any:
    return json.loads(ok(store, "show", rev, "--json"))["content"]


def messages(store: str) -> list[dict[str, Any]]:
    return list(json.loads(ok(store, "compile", "--json"))["messages"])


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "s.tkv")
    ok(path, "init")
    return path


def another_writer(
    monkeypatch: pytest.MonkeyPatch, store: str, write: Callable[[Tract], Any], *, times: int
) -> list[Any]:
    """Make another handle ``write`` to the store right after each of the next ``times`` operations of the
    CLI's handle read its branch tip, as a second process could; returns what each write returned."""
    original = Session.writable
    results: list[Any] = []
    busy: list[bool] = []

    def writable(self: Session, action: str = "commit") -> Any:
        tip = original(self, action)
        if len(results) < times and not busy:  # not for the other handle's own writes
            busy.append(True)
            try:
                with Tract.open(store) as other:
                    results.append(write(other))
            finally:
                busy.clear()
        return tip

    monkeypatch.setattr(Session, "writable", writable)
    return results


# --- item 2: an edit keeps the target's role ----------------------------------------------------------------


def test_an_edit_keeps_the_targets_role_and_an_explicit_role_wins(store: str) -> None:
    system = ok(store, "commit", "--role", "system", "Be brif.")
    ok(store, "commit", "Hi")
    answer = ok(store, "commit", "--role", "assistant", "Helo!")
    fixed = ok(store, "commit", "--edit", answer, "Hello!")
    assert content(store, fixed) == {"type": "dialogue", "role": "assistant", "text": "Hello!"}
    ok(store, "commit", "--edit", system, "Be brief.")
    assert [(m["role"], m["content"]) for m in messages(store)] == [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("assistant", "Hello!"),
    ]
    # the edit of an edit keeps the role the message has now; an explicit --role still wins
    again = ok(store, "commit", "--edit", fixed, "Hello there!")
    assert content(store, again)["role"] == "assistant"
    ok(store, "commit", "--edit", answer, "--role", "user", "I said hello")
    assert [m["role"] for m in messages(store)] == ["system", "user", "user"]


def test_an_edit_keeps_name_tool_calls_and_artifact_type(store: str) -> None:
    named = ok(store, "commit", "--name", "ann", "helo")
    ok(store, "commit", "--edit", named, "hello")
    assert messages(store)[0] == {"role": "user", "content": "hello", "name": "ann"}
    call = '{"id": "c1", "name": "add", "arguments": {"a": 2}}'
    calling = ok(store, "commit", "Let me add.", "--tool-call", call)
    edited = ok(store, "commit", "--edit", calling, "Adding.")
    assert content(store, edited)["tool_calls"] == [{"id": "c1", "name": "add", "arguments": {"a": 2}}]
    assert content(store, edited)["role"] == "assistant"
    with Tract.open(store) as t:
        doc = t.commit({"type": "artifact", "text": "x = 1", "artifact_type": "code", "role": "assistant"})
    ok(store, "commit", "--edit", doc.commit_id, "x = 2")
    assert content(store, "HEAD") == {
        "type": "artifact",
        "text": "x = 2",
        "artifact_type": "code",
        "role": "assistant",
    }


def test_an_edit_of_a_message_with_parts_changes_its_text_and_keeps_its_image(store: str) -> None:
    """Before, a CLI edit wrote the new text alone and the target's image was gone from the context."""
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63f8cfc0f00f0004850180"
        "84a98c210000000049454e44ae426082"
    )
    with Tract.open(store) as t:
        target = t.user(
            [{"type": "text", "text": "look"}, {"type": "image", "data": png, "media_type": "image/png"}]
        ).commit_id
        image = t._session.message_content(target)["parts"][1]
        only_image = t.user([{"type": "image", "data": png, "media_type": "image/png"}]).commit_id
    edited = ok(store, "commit", "--edit", target, "look closely")
    assert content(store, edited)["parts"] == [{"type": "text", "text": "look closely"}, image]
    assert content(store, edited)["text"] == "look closely"
    captioned = ok(store, "commit", "--edit", only_image, "a pixel")
    assert content(store, captioned)["parts"] == [{"type": "text", "text": "a pixel"}, image]


def test_an_edit_of_a_tool_result_with_parts_keeps_its_image_and_pdf(store: str) -> None:
    """Issue 32 item 7: `commit --edit` of a tool result went through tool_result(edit=), which dropped the
    result's image and PDF (an edit of any other message kept them): one rule now, kept unless given."""
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63f8cfc0f00f0004850180"
        "84a98c210000000049454e44ae426082"
    )
    pdf = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"
    ok(store, "commit", "show me")
    ok(store, "commit", "--tool-call", '{"id": "c1", "name": "shot", "arguments": {}}')
    with Tract.open(store) as t:
        result = t.tool_result(
            "c1",
            "shot",
            [
                {"type": "text", "text": "a screenshot"},
                {"type": "image", "data": png, "media_type": "image/png"},
                {"type": "document", "data": pdf, "media_type": "application/pdf"},
            ],
        )
        assert isinstance(result, CommitInfo)
        target = result.commit_id
        media = t._session.message_content(target)["parts"][1:]
    edited = ok(store, "commit", "--edit", target, "a screenshot of the login page")
    assert content(store, edited)["parts"] == [
        {"type": "text", "text": "a screenshot of the login page"},
        *media,
    ]
    assert content(store, edited)["tool_call_id"] == "c1"
    last = messages(store)[-1]
    assert last["role"] == "tool"
    assert [p["type"] for p in last["parts"]] == ["text", "image", "document"]


def test_an_edit_of_a_tool_result_stays_the_result_of_its_call(store: str) -> None:
    ok(store, "commit", "add 2 and 3")
    ok(store, "commit", "--tool-call", '{"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}')
    result = ok(store, "commit", "--tool-call-id", "c1", "6")
    ok(store, "commit", "--edit", result, "5")
    assert messages(store)[-1] == {"role": "tool", "content": "5", "tool_call_id": "c1", "name": "add"}
    with Tract.open(store) as t:
        assert t.original_of("HEAD") == "6"  # the library's edit path: the raw result stays recoverable


# --- item 3: tool calls and results through the library's rules ---------------------------------------------


def test_a_tool_result_for_no_open_call_is_refused_as_the_library_refuses(store: str) -> None:
    ok(store, "commit", "hello")
    for args in (("--role", "tool", "--tool-call-id", "c9"), ("--tool-call-id", "c9")):
        line = refused(store, "commit", *args, "result")
        with Tract.open(store) as t, pytest.raises(InvalidInput) as library:
            t.tool_result("c9", "search", "result")
        assert line == f"Error: {library.value}"
    ok(store, "commit", "--tool-call", '{"id": "c9", "name": "search", "arguments": {"q": "x"}}')
    ok(store, "commit", "--tool-call-id", "c9", "found it")
    twice = refused(store, "commit", "--role", "tool", "--tool-call-id", "c9", "found it again")
    assert "not waiting for a result" in twice
    assert "tractkv commit --edit" in twice
    assert (
        "--tool-call-id is for tool results"
        in run(store, "commit", "--role", "user", "--tool-call-id", "c9", "x")[2]
    )
    assert "needs --tool-call-id" in run(store, "commit", "--role", "tool", "x")[2]


def test_tool_calls_in_every_shape_the_library_takes(store: str, tmp_path: Path) -> None:
    shapes = [
        {"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}},
        {"id": "c2", "type": "function", "function": {"name": "mul", "arguments": '{"a": 2, "b": 3}'}},
        {"type": "tool_use", "id": "c3", "name": "neg", "input": {"a": 2}},
    ]
    ok(store, "commit", "compute")
    flags = [arg for shape in shapes for arg in ("--tool-call", json.dumps(shape))]
    calling = ok(store, "commit", *flags)  # no TEXT: an assistant message that only calls tools
    with Tract.open(str(tmp_path / "library.tkv")) as t:
        expected = t.assistant(tool_calls=shapes).content
    assert content(store, calling) == expected
    assert content(store, calling)["role"] == "assistant"
    # a result needs only the call id: the tool's name comes from the call (a wrong --name is refused)
    assert "called 'mul', not 'add'" in refused(store, "commit", "--tool-call-id", "c2", "--name", "add", "6")
    ok(store, "commit", "--tool-call-id", "c1", "5")
    ok(store, "commit", "--tool-call-id", "c2", "--name", "mul", "6")
    ok(store, "commit", "--role", "tool", "--tool-call-id", "c3", "--", "-2")
    openai = json.loads(ok(store, "compile", "--format", "openai"))["messages"]
    assert [m["function"]["name"] for m in openai[1]["tool_calls"]] == ["add", "mul", "neg"]
    assert [(m["tool_call_id"], m["content"]) for m in openai[2:]] == [("c1", "5"), ("c2", "6"), ("c3", "-2")]
    with Tract.open(store) as t:
        assert [c.content["name"] for c in t.find_tool_results()] == ["add", "mul", "neg"]


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("{bad", "--tool-call is not valid JSON"),
        ('["c1", "add"]', "--tool-call must be a JSON object"),
        ('{"id": "c1", "name": "add", "arguments": "{oops"}', "tool_calls[1].arguments is not valid JSON"),
        ('{"id": "c1", "name": "add", "args": {}}', "unknown keys"),
    ],
)
def test_a_bad_tool_call_is_one_line_naming_it(store: str, value: str, needle: str) -> None:
    ok(store, "commit", "hello")
    assert needle in refused(
        store, "commit", "--tool-call", '{"id": "c0", "name": "ok"}', "--tool-call", value
    )


def test_is_error_marks_a_tool_result_failed_and_an_edit_keeps_or_changes_it(store: str) -> None:
    ok(store, "commit", "look it up")
    ok(store, "commit", "--tool-call", '{"id": "c1", "name": "search", "arguments": {"q": "x"}}')
    failed = ok(store, "commit", "--tool-call-id", "c1", "--is-error", "timed out")
    with Tract.open(store) as t:
        assert t.compile().messages[-1].is_error is True
    ok(store, "commit", "--edit", failed, "timed out after 30 s")  # kept
    with Tract.open(store) as t:
        assert (t.compile().messages[-1].content, t.compile().messages[-1].is_error) == (
            "timed out after 30 s",
            True,
        )
    ok(store, "commit", "--edit", "HEAD", "--no-is-error", "found it")  # changed
    with Tract.open(store) as t:
        assert (t.compile().messages[-1].content, t.compile().messages[-1].is_error) == ("found it", False)
    before = snapshot(store)
    code, out, err = run(store, "commit", "--is-error", "not a tool result")
    assert (code, out) == (2, "")
    assert "--is-error is for tool results" in err
    assert snapshot(store) == before


def test_tool_call_flags_that_contradict_the_role_are_usage_errors(store: str) -> None:
    code, _, err = run(store, "commit", "--role", "user", "--tool-call", '{"id": "c1", "name": "a"}', "x")
    assert code == 2
    assert "--tool-call is for assistant messages" in err
    code, _, err = run(store, "commit")
    assert code == 2
    assert "missing TEXT" in err


# --- item 6: two writers on one store -------------------------------------------------------------------------


def test_an_append_is_remade_on_the_tip_another_writer_moved(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    landed = another_writer(monkeypatch, store, lambda other: other.user("meanwhile").commit_id, times=3)
    mine = ok(store, "commit", "mine")
    assert len(landed) == 1  # one race: the re-made append read the new tip and won
    with Tract.open(store) as t:
        assert t.get_commit(mine).parent_ids == (landed[0],)
    assert [m["content"] for m in messages(store)] == ["meanwhile", "mine"]


def test_a_tool_result_is_remade_on_the_tip_another_writer_moved(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(store, "commit", "add")
    ok(
        store,
        "commit",
        "--tool-call",
        '{"id": "c1", "name": "add"}',
        "--tool-call",
        '{"id": "c2", "name": "add"}',
    )
    # the other writer answers the other call after this command read its tip
    landed = another_writer(
        monkeypatch, store, lambda other: other.tool_result("c2", None, "2").commit_id, times=1
    )
    result = ok(store, "commit", "--tool-call-id", "c1", "1")
    with Tract.open(store) as t:
        assert t.get_commit(result).parent_ids == (landed[0],)
    assert [(m.get("tool_call_id"), m["content"]) for m in messages(store)[2:]] == [("c2", "2"), ("c1", "1")]


def test_a_tool_result_the_other_writer_closed_is_refused(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-made on the new tip, a result is checked there again: a user message closed its call meanwhile."""
    ok(store, "commit", "add")
    ok(store, "commit", "--tool-call", '{"id": "c1", "name": "add"}')
    another_writer(monkeypatch, store, lambda other: other.user("never mind"), times=1)
    code, out, err = run(store, "commit", "--tool-call-id", "c1", "1")
    assert (code, out) == (1, "")
    assert "not waiting for a result" in err
    assert [m["content"] for m in messages(store)][-1] == "never mind"


def test_an_edit_that_loses_a_race_is_refused_with_what_to_do(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = ok(store, "commit", "helo")
    another_writer(monkeypatch, store, lambda other: other.user("meanwhile"), times=1)
    code, out, err = run(store, "commit", "--edit", target, "hello")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert "nothing was written" in err
    assert "run this one again" in err
    assert [m["content"] for m in messages(store)] == ["helo", "meanwhile"]


WRITER = textwrap.dedent(
    """
    import os, sys, time
    from tractkv.cli import cli

    store, tag, count, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    deadline = time.monotonic() + 30
    while not os.path.exists(go) and time.monotonic() < deadline:  # start together
        time.sleep(0.001)
    failed = 0
    for i in range(count):
        try:
            cli.main(["--store", store, "commit", f"{tag} {i}"], prog_name="tractkv")
        except SystemExit as exc:
            failed += bool(exc.code)
    sys.exit(failed)
    """
)


def test_cli_writers_in_several_processes_all_land(tmp_path: Path, store: str) -> None:
    """Three processes commit 40 messages each through the CLI at once (before: about 1 in 80 failed with
    "ref moved ... nothing was written")."""
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    tags, count = ("a", "b", "c"), 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, store, tag, str(count), str(go)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in tags
    ]
    time.sleep(0.5)  # let them all start
    go.touch()
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert errors == ["", "", ""]
    texts = [m["content"] for m in messages(store)]
    assert len(texts) == len(tags) * count
    for tag in tags:  # every commit landed, each writer's in its own order
        assert [t for t in texts if t.startswith(f"{tag} ")] == [f"{tag} {i}" for i in range(count)]
    snapshot(store)  # fsck clean


# --- item 9: stdin ----------------------------------------------------------------------------------------------


def test_stdin_loses_its_trailing_whitespace_unless_verbatim(store: str) -> None:
    ok(store, "commit", "-", input="Hello\n")
    ok(store, "commit", "-", input="  code:\n\n\tx = 1  \n\n\n \t\r\n")
    ok(store, "commit", "--verbatim", "-", input="Hello\n")
    ok(store, "commit", "Hello\n")  # TEXT itself is taken as given
    assert [m["content"] for m in messages(store)] == ["Hello", "  code:\n\n\tx = 1", "Hello\n", "Hello\n"]
    refused(store, "commit", "-", input=" \n\n")  # nothing but whitespace: an empty message


def test_verbatim_without_stdin_is_a_usage_error_that_writes_nothing(store: str) -> None:
    ok(store, "commit", "hello")
    before = snapshot(store)
    code, out, err = run(store, "commit", "--verbatim", "Hello\n")
    assert (code, out) == (2, "")
    assert "--verbatim is for text read from stdin" in err
    assert snapshot(store) == before


def test_input_that_is_not_utf8_is_named_with_its_byte_offset(store: str, tmp_path: Path) -> None:
    ok(store, "commit", "hello")
    line = refused(store, "commit", "-", input=b"caf\xc3\xa9 \xff\n")
    assert line.startswith("Error: input is not valid UTF-8: byte 0xff at offset 6")
    assert "surrogate" not in line
    before = snapshot(store)
    proc = subprocess.run(  # a TEXT argument the shell passed as bytes
        [sys.executable, "-m", "tractkv", "--store", store, "commit", b"ab\xe9c"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert (
        proc.stderr
        == "Error: TEXT is not valid UTF-8: byte 0xe9 at offset 2 (convert it to UTF-8 first, e.g. with iconv)\n"
    )
    assert snapshot(store) == before


def _reading_stdin(pid: int) -> bool:
    """Whether the process is blocked in read(0, ...) (Linux: /proc/PID/syscall starts with "0 0x0")."""
    try:
        return Path(f"/proc/{pid}/syscall").read_text().startswith("0 0x0 ")
    except OSError:
        return False


def test_ctrl_c_exits_130_and_writes_nothing(store: str) -> None:
    if not Path(f"/proc/{os.getpid()}/syscall").exists():
        pytest.skip("needs Linux /proc/PID/syscall to see the process wait on stdin")
    ok(store, "commit", "hello")
    before = snapshot(store)
    # A shell starts background jobs with SIGINT ignored, an ignored signal stays ignored across exec, and
    # Python then never raises KeyboardInterrupt: while starting the command, handle SIGINT here, so the
    # command starts with the default disposition a terminal gives it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tractkv", "--store", store, "commit", "-"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert proc.stdin is not None
        proc.stdin.write("half a mess")
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while not _reading_stdin(proc.pid):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "never waited on stdin"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert out == ""
    assert err == "Interrupted.\n"
    assert snapshot(store) == before


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path) -> None:
    """`tractkv log | head -1`: no "unexpected BrokenPipeError ... this is a bug", exit 141 as git."""
    store = str(tmp_path / "s.tkv")
    with Tract.open(store) as t, t.batch():
        for i in range(3000):
            t.user(f"message {i} " + "x" * 60)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tractkv", "--store", store, "log"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # the reader goes away, like `head -1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert first
    assert err == ""
