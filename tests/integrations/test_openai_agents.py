"""TractkvSession with the OpenAI Agents SDK: an agent run against the local recording server remembers its
session in a fresh process and on a clone; the protocol behaves as the SDK's own SQLiteSession does."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession
from agents.memory import SessionSettings
from llm.conftest import openai_completion

from tractkv import Tract
from tractkv.errors import DecodeError, InvalidInput
from tractkv.integrations.openai_agents import TractkvSession, session_branch
from tractkv.store import fsck

from .conftest import ROOT, run_script


def _texts(body: dict[str, Any]) -> list[str]:
    """The (role, text) of each message a chat.completions request sent, system prompt left out."""
    out = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content)
        if message["role"] != "system":
            out.append(f"{message['role']}: {content}")
    return out


@pytest.mark.slow  # fresh interpreters
def test_an_agent_resumes_its_session_in_a_fresh_process_and_on_a_clone(
    tmp_path: Path, recorder: Any
) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    url = f"{recorder.url}/v1"
    recorder.reply(openai_completion("Hi Ada."))
    assert run_script("agents_app.py", a, "chat 1", url, "I am Ada") == {"output": "Hi Ada.", "items": 2}
    recorder.reply(openai_completion("You are Ada."))
    assert run_script("agents_app.py", a, "chat 1", url, "Who am I?") == {
        "output": "You are Ada.",
        "items": 4,
    }
    assert _texts(recorder.bodies[-1]) == ["user: I am Ada", "assistant: Hi Ada.", "user: Who am I?"]
    # another machine: clone the store, the session continues there
    Tract.clone(a, b).close()
    recorder.reply(openai_completion("Still Ada."))
    assert run_script("agents_app.py", b, "chat 1", url, "And now?") == {"output": "Still Ada.", "items": 6}
    assert _texts(recorder.bodies[-1])[:4] == [*_texts(recorder.bodies[-2]), "assistant: You are Ada."]
    assert len(recorder.requests) == 3
    with Tract.open(b, branch=session_branch("chat 1")) as t:
        # the conversation is a tractkv history: compile shows it
        assert [m.content for m in t.compile().messages][-2:] == ["And now?", "Still Ada."]
        assert fsck(t.store).ok


async def _operations(session: Any) -> list[Any]:
    out: list[Any] = []
    await session.add_items([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    await session.add_items(
        [
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ]
    )
    await session.add_items([])
    out.append(await session.get_items())
    for limit in (2, 0, -1, 10):
        out.append(await session.get_items(limit=limit))
    out.append(await session.pop_item())
    out.append(await session.pop_item())
    out.append(await session.get_items())
    await session.add_items([{"role": "user", "content": "c"}])
    out.append(await session.get_items(limit=1))
    await session.clear_session()
    out.append(await session.get_items())
    out.append(await session.pop_item())
    await session.add_items([{"role": "user", "content": "again", "extra": [1, None, {"x": 1.5}]}])
    out.append(await session.get_items())
    return out


def test_the_protocol_behaves_as_the_sdks_sqlite_session(tmp_path: Path) -> None:
    expected = asyncio.run(_operations(SQLiteSession("s")))
    with TractkvSession("s", str(tmp_path / "store")) as session:
        assert asyncio.run(_operations(session)) == expected
    with TractkvSession("s", str(tmp_path / "store")) as session:  # a fresh handle reads the same
        assert asyncio.run(session.get_items()) == expected[-1]


def test_session_settings_limit_applies_when_no_limit_is_given(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s")) as t:
        session = TractkvSession("x", t, session_settings=SessionSettings(limit=1))
        asyncio.run(session.add_items([{"role": "user", "content": "1"}, {"role": "user", "content": "2"}]))
        assert asyncio.run(session.get_items()) == [{"role": "user", "content": "2"}]
        assert len(asyncio.run(session.get_items(limit=5))) == 2
        session.close()
        assert t.current_branch == "main"  # the Tract's HEAD never moved; it stays open
        assert t.head is None


def test_pop_is_an_append_so_a_popped_session_still_pushes_as_a_fast_forward(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    with TractkvSession("s", a) as session:
        asyncio.run(
            session.add_items([{"role": "user", "content": "keep"}, {"role": "user", "content": "drop"}])
        )
    Tract.clone(a, b).close()
    with TractkvSession("s", b) as session:
        assert asyncio.run(session.pop_item()) == {"role": "user", "content": "drop"}
        session.tract.switch(session_branch("s"))
        outcome = session.tract.push("origin", session_branch("s"))
        assert outcome.ok
    with TractkvSession("s", a) as session:
        assert asyncio.run(session.get_items()) == [{"role": "user", "content": "keep"}]
        with Tract.open(a, branch=session_branch("s")) as t:
            assert [m.content for m in t.compile().messages] == ["keep"]  # the skip hides it in tractkv too
            t.annotate(t.log()[1].commit_id, "normal")  # and tractkv's own annotate brings it back
        assert len(asyncio.run(session.get_items())) == 2


def test_hostile_and_bad_items(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s"), branch=session_branch("s")) as t:
        session = TractkvSession("s", t)
        with pytest.raises(InvalidInput):
            asyncio.run(session.add_items(["not a dict"]))  # type: ignore[list-item]
        with pytest.raises(InvalidInput):
            asyncio.run(session.add_items([{"bad": float("nan")}]))  # what a hashed payload may not hold
        assert asyncio.run(session.get_items()) == []
        t.commit({"type": "reasoning", "text": "x"}, metadata={"agents": {"v": 1, "item": "not a dict"}})
        with pytest.raises(DecodeError, match="not an Agents SDK item"):
            asyncio.run(session.get_items())
        with pytest.raises(InvalidInput):
            TractkvSession("", t)


def test_without_the_extra_importing_says_which_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['agents'] = None\n"
        "import tractkv\n"
        "try:\n"
        "    import tractkv.integrations.openai_agents\n"
        "except tractkv.MissingExtra as exc:\n"
        "    print(exc.extra, '|', exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "agents | tractkv.integrations.openai_agents needs the agents extra: "
        "pip install 'tractkv[agents]' (no module named 'agents')"
    )


def test_get_items_returns_copies_the_caller_may_edit(tmp_path: Path) -> None:
    with TractkvSession("s", str(tmp_path / "s")) as session:
        asyncio.run(session.add_items([{"role": "user", "content": "hi", "id": "m1", "x": {"y": [1]}}]))
        got = asyncio.run(session.get_items())
        got[0].pop("id")
        got[0]["x"]["y"].append(2)
        assert asyncio.run(session.get_items()) == [
            {"role": "user", "content": "hi", "id": "m1", "x": {"y": [1]}}
        ]
        popped = asyncio.run(session.pop_item())  # a popped item too
        popped["x"]["y"].append(3)
        asyncio.run(session.get_items())
        with Tract.open(str(tmp_path / "s"), branch=session_branch("s")) as t:
            t.annotate(t.log()[1].commit_id, "normal")  # shown again: as stored
        assert asyncio.run(session.get_items())[0]["x"] == {"y": [1]}


def test_two_session_objects_appending_at_once_land_every_item(tmp_path: Path) -> None:
    store = str(tmp_path / "s")

    async def both() -> None:
        a, b = TractkvSession("s", store), TractkvSession("s", store)
        await a.get_items()
        await b.get_items()  # both have read the same tip

        async def add(session: TractkvSession, tag: str) -> None:
            for i in range(20):
                await session.add_items(
                    [{"role": "user", "content": f"{tag}{i}"}, {"role": "assistant", "content": "ok"}]
                )

        await asyncio.gather(add(a, "a"), add(b, "b"))
        a.close()
        b.close()

    asyncio.run(both())
    with TractkvSession("s", store) as session:
        items = asyncio.run(session.get_items())
    texts = [item["content"] for item in items]
    assert len(items) == 80
    assert [t for t in texts if t.startswith("a")] == [f"a{i}" for i in range(20)]  # each writer's order
    assert [t for t in texts if t.startswith("b")] == [f"b{i}" for i in range(20)]
    for i, text in enumerate(texts[::2]):  # one call's items stay together
        assert texts[2 * i + 1] == "ok", (i, text)


@pytest.mark.slow  # fresh interpreters
def test_two_processes_appending_at_once_land_every_item(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    TractkvSession("s", store).close()  # created before both start
    code = (
        "import asyncio, sys, time\n"
        "from tractkv.integrations.openai_agents import TractkvSession\n"
        "async def main():\n"
        "    with TractkvSession('s', sys.argv[1]) as s:\n"
        "        await s.get_items()\n"
        "        time.sleep(max(0.0, float(sys.argv[3]) - time.time()))  # both start appending at once\n"
        "        for i in range(40):\n"
        "            await s.add_items([{'role': 'user', 'content': sys.argv[2] + str(i)}])\n"
        "asyncio.run(main())\n"
    )
    env = {"PYTHONPATH": str(ROOT)}
    start = time.time() + 4  # after both interpreters have imported the SDK
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, store, tag, str(start)], env=env, stderr=subprocess.PIPE, text=True
        )
        for tag in ("p", "q")
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with TractkvSession("s", store) as session:
        texts = [item["content"] for item in asyncio.run(session.get_items())]
    assert sorted(texts) == sorted([f"p{i}" for i in range(40)] + [f"q{i}" for i in range(40)])


def test_items_read_back_must_be_json_values(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s"), branch=session_branch("s")) as t:
        session = TractkvSession("s", t)
        with pytest.raises(InvalidInput, match="bytes"):
            asyncio.run(session.add_items([{"role": "user", "content": b"raw"}]))  # type: ignore[list-item]
        with pytest.raises(InvalidInput, match="key"):
            asyncio.run(session.add_items([{"role": "user", "content": "x", "m": {1: "int key"}}]))  # type: ignore[list-item]
        assert asyncio.run(session.get_items()) == []
        # what another machine's store may hold: a payload the canonical encoding takes, JSON does not
        t.commit({"type": "reasoning", "text": "x"}, metadata={"agents": {"v": 1, "item": {"content": b"x"}}})
        with pytest.raises(DecodeError, match="bytes"):
            asyncio.run(session.get_items())


def test_clear_session_uses_the_branch_delete_and_refuses_a_checked_out_session(tmp_path: Path) -> None:
    from tractkv.engine.budget import stored_budget
    from tractkv.engine.history import HEADS

    store = str(tmp_path / "s")
    with Tract.open(store) as t:
        t.commit({"type": "dialogue", "role": "user", "text": "on main"})
        session = TractkvSession("s", t)
        asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
        t.switch(session_branch("s"))  # the user's Tract stands on the session's branch
        t.set_budget(500)
        with pytest.raises(InvalidInput, match="checked out"):
            asyncio.run(session.clear_session())
        assert len(asyncio.run(session.get_items())) == 1  # nothing deleted
        t.switch("main")
        asyncio.run(session.clear_session())
        assert asyncio.run(session.get_items()) == []
        assert stored_budget(t.store, HEADS + session_branch("s")) is None  # dropped with the branch
        assert session_branch("s") not in [b.name for b in t.list_branches()]


def test_a_session_id_too_long_for_a_branch_name_is_refused_at_construction(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="too long for a branch name"):
        TractkvSession("é" * 100, str(tmp_path / "s"))
    assert not (tmp_path / "s").exists()  # refused before the store was opened


def test_a_session_that_went_on_in_two_places_reads_both_sides_after_a_merge(tmp_path: Path) -> None:
    """The session continued on a clone and on the original, then the clone pulled (a merge commit): every
    item of both sides is read, in tractkv's merge order (ours, then theirs' new ones), and a pop on the other
    side still applies. Before, only the first parents were replayed and the other side's items were lost."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    with TractkvSession("s", a) as session:
        asyncio.run(session.add_items([{"role": "user", "content": "shared"}]))
    Tract.clone(a, b).close()
    with TractkvSession("s", a) as session:
        asyncio.run(
            session.add_items(
                [{"role": "user", "content": "on a"}, {"role": "user", "content": "popped on a"}]
            )
        )
        assert asyncio.run(session.pop_item()) == {"role": "user", "content": "popped on a"}
    with TractkvSession("s", b) as session:
        asyncio.run(session.add_items([{"role": "user", "content": "on b"}]))
        assert [i["content"] for i in asyncio.run(session.get_items())] == ["shared", "on b"]  # read before
        with Tract.open(b, branch=session_branch("s")) as t:
            result = t.pull("origin")
            assert result.kind == "merge"  # a real merge commit
        # the same object reads on from the tip it had: the merge makes it replay every side
        assert [i["content"] for i in asyncio.run(session.get_items())] == ["shared", "on b", "on a"]
    with TractkvSession("s", b) as session:  # a fresh handle reads the same
        assert [i["content"] for i in asyncio.run(session.get_items())] == ["shared", "on b", "on a"]
        asyncio.run(session.add_items([{"role": "user", "content": "after"}]))  # and appends after the merge
        assert [i["content"] for i in asyncio.run(session.get_items(limit=2))] == ["on a", "after"]
