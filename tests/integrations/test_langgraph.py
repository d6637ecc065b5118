"""TractkvSaver with real LangGraph graphs and a fake chat model: resume across processes and machines, time
travel, interrupts, subgraph namespaces, storage that grows with the messages, and hostile stores."""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command

from tractkv import Tract
from tractkv.errors import DecodeError, InvalidInput, MissingExtra
from tractkv.integrations.langgraph import TractkvSaver, thread_branch
from tractkv.model import Blob, decode
from tractkv.store import fsck

from .conftest import ROOT, run_script
from .lg_app import chat_graph, config, react_graph, subgraph_graph, texts


@pytest.mark.slow  # fresh interpreters
def test_a_thread_resumes_in_a_fresh_process(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    assert run_script("lg_app.py", store, "turn", "t1", "hello") == ["human: hello", "ai: sure #1"]
    assert run_script("lg_app.py", store, "turn", "t1", "again") == [
        "human: hello",
        "ai: sure #1",
        "human: again",
        "ai: sure #3",
    ]
    assert run_script("lg_app.py", store, "turn", "other thread", "hi") == ["human: hi", "ai: sure #1"]
    with Tract.open(store) as t:
        names = {b.name for b in t.list_branches()}
        assert {thread_branch("t1"), thread_branch("other thread")} <= names
        assert thread_branch("other thread") == "langgraph/other%20thread"
        assert fsck(t.store).ok


@pytest.mark.slow  # fresh interpreters
def test_interrupt_then_resume_in_another_process(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    assert run_script("lg_app.py", store, "start", "r", "draft it") == [{"draft": "sure #1"}]
    state = run_script("lg_app.py", store, "state", "r", "-")
    assert state == {"messages": ["human: draft it", "ai: sure #1"], "next": ["review"]}
    assert run_script("lg_app.py", store, "resume", "r", "approved")[-1] == "ai: approved: sure #1"
    assert run_script("lg_app.py", store, "state", "r", "-")["next"] == []


@pytest.mark.slow  # fresh interpreters
def test_an_interrupted_graph_resumes_on_a_clone_and_after_a_pull(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    Tract.clone(a if Path(a).exists() else _empty(a), b).close()  # b knows a as origin, before any thread
    run_script("lg_app.py", a, "start", "r", "draft it")
    # clone: every thread branch comes along
    c = str(tmp_path / "c")
    Tract.clone(a, c).close()
    assert run_script("lg_app.py", c, "resume", "r", "approved on c")[-1] == "ai: approved on c: sure #1"
    # pull: the thread's branch fast-forwards to a's
    with Tract.open(b, branch=thread_branch("r")) as t:
        assert t.pull("origin", thread_branch("r")).kind == "fast-forward"
    assert run_script("lg_app.py", b, "resume", "r", "approved on b")[-1] == "ai: approved on b: sure #1"
    # the origin still waits: each machine resumed its own copy
    assert run_script("lg_app.py", a, "state", "r", "-")["next"] == ["review"]


def _empty(path: str) -> str:
    Tract.open(path).close()
    return path


@pytest.mark.slow  # fresh interpreters
def test_an_interrupted_graph_resumes_on_a_clone_of_a_hub(tmp_path: Path, hub: Callable[[], str]) -> None:
    url = hub()
    a = str(tmp_path / "a")
    run_script("lg_app.py", a, "start", "r", "draft it")
    run_script("lg_app.py", a, "turn", "chat", "hello")
    with Tract.open(a) as t:
        t.remote_add("origin", url)
        for name in (thread_branch("r"), thread_branch("chat")):
            assert t.push("origin", name).ok
    c = str(tmp_path / "c")
    Tract.clone(url, c).close()
    assert run_script("lg_app.py", c, "resume", "r", "approved")[-1] == "ai: approved: sure #1"
    assert run_script("lg_app.py", c, "turn", "chat", "more")[-1] == "ai: sure #3"


def test_time_travel_forks_from_an_earlier_checkpoint_and_keeps_every_checkpoint(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    with TractkvSaver.from_path(store) as saver:
        app = chat_graph(saver)
        for text in ("one", "two", "three"):
            app.invoke({"messages": [HumanMessage(content=text)]}, config("t"))
        history = list(app.get_state_history(config("t")))
        after_one = next(s for s in history if len(s.values.get("messages", ())) == 2 and not s.next)
        forked = app.invoke({"messages": [HumanMessage(content="fork")]}, after_one.config)
        assert texts(forked["messages"]) == ["human: one", "ai: sure #1", "human: fork", "ai: sure #3"]
        assert texts(app.get_state(config("t")).values["messages"]) == texts(forked["messages"])
        assert len(list(app.get_state_history(config("t")))) == len(history) + 3
        # the old line is still there: its latest checkpoint reads as it did
        old_tip = history[0]
        assert texts(app.get_state(old_tip.config).values["messages"])[-1] == "ai: sure #5"
        count = len(history) + 3
    with TractkvSaver.from_path(store) as saver:  # a fresh index, built from the commits
        app = chat_graph(saver)
        assert len(list(app.get_state_history(config("t")))) == count
        assert texts(app.get_state(config("t")).values["messages"])[-2:] == ["human: fork", "ai: sure #3"]
        parent = saver.get_tuple(config("t"))
        assert parent is not None
        assert parent.parent_config is not None


def test_each_message_is_stored_once(tmp_path: Path) -> None:
    """O(N) storage: the message list nodes of a thread hold each message once (a saver that stores each
    checkpoint's whole list holds N^2/2 items), and each message blob exists once."""
    store = str(tmp_path / "s")
    turns = 12
    with TractkvSaver.from_path(store) as saver:
        app = chat_graph(saver)
        for turn in range(turns):
            app.invoke({"messages": [HumanMessage(content=f"message {turn}")]}, config("t"))
        store_ = saver.tract.store
        nodes, items = 0, 0
        for _oid, raw in store_.iter_raw_objects():
            obj = decode(raw)
            if isinstance(obj, Blob) and isinstance(obj.data, dict) and obj.data.get("lg") == "messages":
                nodes += 1
                items += len(obj.data["items"])
        assert items == 2 * turns
        assert nodes >= turns  # one node per checkpoint that added messages
        assert fsck(store_).ok


def test_a_subgraph_namespace_is_its_own_branch_and_resumes(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    with TractkvSaver.from_path(store) as saver:
        out = subgraph_graph(saver).invoke({"messages": [HumanMessage(content="nested")]}, config("n"))
        assert [i.value for i in out["__interrupt__"]] == [{"draft": "sure #1"}]
        names = [b.name for b in saver.tract.list_branches()]
        assert any(name.startswith("langgraph-ns/n/") for name in names), names
    with TractkvSaver.from_path(store) as saver:
        app = subgraph_graph(saver)
        state = app.get_state(config("n"), subgraphs=True)
        assert state.next == ("inner",)
        out = app.invoke(Command(resume="ok"), config("n"))
        assert texts(out["messages"])[-2:] == ["ai: ok: sure #1", "ai: sure #3"]
        namespaces = {c.config["configurable"]["checkpoint_ns"] for c in saver.list(config("n"))}
        assert "" in namespaces
        assert len(namespaces) >= 2  # the subgraph's checkpoints are listed with the thread's


def test_async_twins_run_a_graph(tmp_path: Path) -> None:
    async def scenario(saver: TractkvSaver) -> tuple[list[str], int, int]:
        app = chat_graph(saver)
        await app.ainvoke({"messages": [HumanMessage(content="a")]}, config("t"))
        out = await app.ainvoke({"messages": [HumanMessage(content="b")]}, config("t"))
        listed = [c async for c in saver.alist(config("t"))]
        assert await saver.aget_tuple(config("t")) is not None
        await saver.adelete_thread("t")
        return texts(out["messages"]), len(listed), len(list(saver.list(config("t"))))

    with TractkvSaver.from_path(str(tmp_path / "s")) as saver:
        messages, listed, after = asyncio.run(scenario(saver))
    assert messages == ["human: a", "ai: sure #1", "human: b", "ai: sure #3"]
    assert listed == 6
    assert after == 0


def test_delete_thread_removes_its_branches_only(tmp_path: Path) -> None:
    with TractkvSaver.from_path(str(tmp_path / "s")) as saver:
        app = chat_graph(saver)
        app.invoke({"messages": [HumanMessage(content="x")]}, config("gone"))
        app.invoke({"messages": [HumanMessage(content="y")]}, config("kept"))
        subgraph_graph(saver).invoke({"messages": [HumanMessage(content="z")]}, config("gone"))
        saver.delete_thread("gone")
        assert saver.get_tuple(config("gone")) is None
        assert list(saver.list(config("gone"))) == []
        assert saver.get_tuple(config("kept")) is not None
        names = [b.name for b in saver.tract.list_branches()]
        assert names == ["langgraph/kept", "main"] or set(names) == {"langgraph/kept"}
        # the thread starts afresh
        out = app.invoke({"messages": [HumanMessage(content="new")]}, config("gone"))
        assert texts(out["messages"]) == ["human: new", "ai: sure #1"]


def test_list_filters_before_and_limit(tmp_path: Path) -> None:
    with TractkvSaver.from_path(str(tmp_path / "s")) as saver:
        app = chat_graph(saver)
        for text in ("a", "b"):
            app.invoke({"messages": [HumanMessage(content=text)]}, config("t"))
        app.invoke({"messages": [HumanMessage(content="c")]}, config("u"))
        every = list(saver.list(None))
        assert len(every) == 9
        mine = list(saver.list(config("t")))
        assert [c.config["configurable"]["checkpoint_id"] for c in mine] == sorted(
            (c.config["configurable"]["checkpoint_id"] for c in mine), reverse=True
        )
        assert len(list(saver.list(config("t"), limit=2))) == 2
        inputs = list(saver.list(config("t"), filter={"source": "input"}))
        assert len(inputs) == 2
        assert all(c.metadata["source"] == "input" for c in inputs)
        older = list(saver.list(config("t"), before=mine[1].config))
        assert len(older) == len(mine) - 2


# --- hostile stores ---------------------------------------------------------------------------------------


class _Crafting:
    """A serializer that writes chosen bytes for the value "EVIL" (what a hostile machine could have stored)."""

    def __init__(self, serde_type: str, payload: bytes) -> None:
        self.inner = JsonPlusSerializer()
        self.serde_type, self.payload = serde_type, payload

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return (self.serde_type, self.payload) if obj == "EVIL" else self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)


def _put_evil(tract: Tract, serde: Any) -> None:
    saver = TractkvSaver(tract, serde=serde)
    app = chat_graph(saver)
    app.invoke({"messages": [HumanMessage(content="x")]}, config("t"))
    tip = saver.get_tuple(config("t"))
    assert tip is not None
    checkpoint = dict(tip.checkpoint)
    checkpoint["id"] = checkpoint["id"][:-4] + "ffff"
    checkpoint["channel_values"] = {"evil": "EVIL"}
    checkpoint["channel_versions"] = {**checkpoint["channel_versions"], "evil": "1"}
    saver.put(tip.config, checkpoint, {"source": "update", "step": 9}, {"evil": "1"})  # type: ignore[arg-type]


def test_msgpack_from_a_store_never_calls_what_it_names(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    call = ormsgpack.packb(["os", "system", f"touch {marker}"])
    evil = ormsgpack.packb(ormsgpack.Ext(0, call))  # EXT_CONSTRUCTOR_SINGLE_ARG: os.system("touch ...")
    with Tract.open(str(tmp_path / "s")) as t:
        _put_evil(t, _Crafting("msgpack", evil))
        saver = TractkvSaver(t)  # the default serializer: strict msgpack
        tip = saver.get_tuple(config("t"))
        assert tip is not None
        assert tip.checkpoint["channel_values"]["evil"] == f"touch {marker}"  # left as data
    assert not marker.exists()


def test_pickles_are_refused_on_write_and_on_read(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    payload = pickle.dumps(_Reducer(marker))
    with Tract.open(str(tmp_path / "s")) as t:
        with pytest.raises(InvalidInput, match="no pickles"):
            _put_evil(t, _Crafting("pickle", payload))
        # a store written by another saver that did store one (a hostile or an old machine)
        saver = TractkvSaver(t, serde=JsonPlusSerializer(pickle_fallback=True))
        saver._dumps = lambda value: {  # type: ignore[method-assign]
            "lg": "value",
            "serde": "pickle" if value == "EVIL" else saver.serde.dumps_typed(value)[0],
            "data": payload if value == "EVIL" else saver.serde.dumps_typed(value)[1],
        }
        _put_evil_with(saver)
        reader = TractkvSaver(t, serde=JsonPlusSerializer(pickle_fallback=True))  # even a pickling serde
        with pytest.raises(DecodeError, match="never unpickled"):
            reader.get_tuple(config("t"))
    assert not marker.exists()


class _Reducer:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (Path.touch, (self.marker,))


def _put_evil_with(saver: TractkvSaver) -> None:
    app = chat_graph(saver)
    app.invoke({"messages": [HumanMessage(content="x")]}, config("t"))
    tip = saver.get_tuple(config("t"))
    assert tip is not None
    checkpoint = dict(tip.checkpoint)
    checkpoint["id"] = checkpoint["id"][:-4] + "ffff"
    checkpoint["channel_values"] = {"evil": "EVIL"}
    checkpoint["channel_versions"] = {**checkpoint["channel_versions"], "evil": "1"}
    saver.put(tip.config, checkpoint, {"source": "update", "step": 9}, {"evil": "1"})  # type: ignore[arg-type]


def test_a_malformed_record_is_a_decode_error(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s"), branch=thread_branch("t")) as t:
        t.commit({"type": "reasoning", "text": "x"}, metadata={"langgraph": {"v": 1, "kind": "checkpoint"}})
        with pytest.raises(DecodeError, match="id is not a string"):
            TractkvSaver(t).get_tuple(config("t"))
        t.commit({"type": "reasoning", "text": "y"}, metadata={"note": "not ours"})
        with pytest.raises(DecodeError):
            TractkvSaver(t).get_tuple(config("t"))
    for bad, error in (
        ({"id": 7, "blob": "0" * 64}, "id is not a string"),
        ({"id": "m"}, "blob is not an object"),
    ):
        with Tract.open(str(tmp_path / "m"), branch=thread_branch(f"t{error[:4]}")) as t:
            t.user("hi", metadata={"langgraph": {"v": 1, "kind": "message", **bad}})
            with pytest.raises(DecodeError, match=error):
                TractkvSaver(t).get_tuple(config(f"t{error[:4]}"))


def test_the_saver_never_moves_the_tracts_head(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "s")) as t:
        t.user("my own work")
        head = t.head
        chat_graph(TractkvSaver(t)).invoke({"messages": [HumanMessage(content="x")]}, config("t"))
        assert t.current_branch == "main"
        assert t.head == head
    with Tract.open(str(tmp_path / "s")) as t:
        assert t.current_branch == "main"


def test_without_the_extra_importing_says_which_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['langgraph'] = None\n"
        "import tractkv\n"
        "assert 'tractkv.integrations' not in sys.modules\n"
        "try:\n"
        "    import tractkv.integrations.langgraph\n"
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
        "langgraph | tractkv.integrations.langgraph needs the langgraph extra: "
        "pip install 'tractkv[langgraph]' (no module named 'langgraph.checkpoint')"
    )
    assert issubclass(MissingExtra, Exception)


def test_a_record_naming_another_checkpoints_bytes_is_a_decode_error(tmp_path: Path) -> None:
    """A hostile commit reusing a real checkpoint's blobs under another id (to make LangGraph resume from a
    state it never saved under that id) is refused, not returned."""
    with Tract.open(str(tmp_path / "s")) as t:
        chat_graph(TractkvSaver(t)).invoke({"messages": [HumanMessage(content="x")]}, config("t"))
        with Tract.open(str(tmp_path / "s"), branch=thread_branch("t")) as writer:
            record = dict(
                next(c.metadata for c in writer.log() if c.metadata["langgraph"]["kind"] == "checkpoint")
            )
            forged = dict(record["langgraph"], id="ffffffff-ffff-6fff-ffff-ffffffffffff")
            writer.commit({"type": "reasoning", "text": "x"}, metadata={"langgraph": forged})
        with pytest.raises(DecodeError, match="not a LangGraph checkpoint of that id"):
            TractkvSaver(t).get_tuple(config("t"))


def _redacting_graph(saver: TractkvSaver) -> Any:
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    def redact(state: MessagesState) -> dict[str, Any]:
        first = state["messages"][0]
        first.content = "[redacted]"  # edited in place, returned again: the reducer keeps the same object
        return {"messages": [first, AIMessage(content="done")]}

    builder = StateGraph(MessagesState)
    builder.add_node("redact", redact)
    builder.add_edge(START, "redact")
    return builder.compile(checkpointer=saver)


def test_a_message_edited_in_place_is_stored_and_reads_never_share_the_cache(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    with TractkvSaver.from_path(store) as saver:
        out = _redacting_graph(saver).invoke({"messages": [HumanMessage(content="secret")]}, config("t"))
        assert texts(out["messages"]) == ["human: [redacted]", "ai: done"]
        app = chat_graph(saver)
        app.invoke({"messages": [HumanMessage(content="hi")]}, config("u"))
        read = app.get_state(config("u")).values["messages"]
        read[0].content = "MUTATED"  # the caller edits what it read: the saver's next read is unchanged
        assert texts(app.get_state(config("u")).values["messages"]) == ["human: hi", "ai: sure #1"]
    with TractkvSaver.from_path(store) as fresh:  # what is stored, as another process reads it
        assert texts(chat_graph(fresh).get_state(config("t")).values["messages"]) == [
            "human: [redacted]",
            "ai: done",
        ]
        assert texts(chat_graph(fresh).get_state(config("u")).values["messages"]) == [
            "human: hi",
            "ai: sure #1",
        ]


def _list_items(tract: Tract) -> int:
    items = 0
    for _oid, raw in tract.store.iter_raw_objects():
        obj = decode(raw)
        if isinstance(obj, Blob) and isinstance(obj.data, dict) and obj.data.get("lg") == "messages":
            items += len(obj.data["items"])
    return items


def test_storage_stays_linear_with_more_threads_than_the_list_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each list node extends its parent's even when the parent's list is not cached (read from the store)."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    import tractkv.integrations.langgraph as lg

    async def model(state: MessagesState) -> dict[str, Any]:
        await asyncio.sleep(0.005)  # the model call: the other conversations run meanwhile
        return {"messages": [AIMessage(content=f"echo {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_edge(START, "model")
    monkeypatch.setattr(lg, "MAX_LISTS", 2)
    threads, turns = 4, 5
    with TractkvSaver.from_path(str(tmp_path / "s"), durable=False) as saver:
        app = builder.compile(checkpointer=saver)

        async def run() -> None:
            for turn in range(turns):
                await asyncio.gather(
                    *(
                        app.ainvoke({"messages": [HumanMessage(content=f"{t}:{turn}")]}, config(str(t)))
                        for t in range(threads)
                    )
                )

        asyncio.run(run())
        # each message once (the old code wrote a full node whenever the parent list was not cached)
        assert _list_items(saver.tract) == threads * turns * 2
        assert texts(app.get_state(config("2")).values["messages"])[-2:] == ["human: 2:4", "ai: echo 2:4"]


def test_listing_the_history_decodes_each_message_once(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    turns = 40
    with TractkvSaver.from_path(store, durable=False) as saver:
        app = chat_graph(saver)
        for turn in range(turns):
            app.invoke({"messages": [HumanMessage(content=f"m{turn}")]}, config("t"))
    with TractkvSaver.from_path(store) as saver:
        loads = 0
        real = saver._loads

        def counting(*args: Any, **kwargs: Any) -> Any:
            nonlocal loads
            loads += 1
            return real(*args, **kwargs)

        saver._loads = counting  # type: ignore[method-assign]
        history = list(saver.list(config("t")))
        assert len(history) == 3 * turns
        messages = 2 * turns
        # each message once, plus each checkpoint's few own blobs (checkpoint, metadata, values, writes);
        # the old code decoded ~N^2/2 = 1,640 messages
        assert loads <= messages + 4 * len(history), loads
        assert len(chat_graph(saver).get_state(config("t")).values["messages"]) == messages

        async def first_two() -> list[Any]:
            out = []
            async for item in saver.alist(config("t")):
                out.append(item)
                if len(out) == 2:
                    break
            return out

        loads = 0
        assert len(asyncio.run(first_two())) == 2
        assert loads < 30  # streamed: the rest of the history is never read


def test_a_thread_that_moved_on_two_machines_keeps_both_sides_after_a_merge(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    with TractkvSaver.from_path(a) as saver:
        chat_graph(saver).invoke({"messages": [HumanMessage(content="base")]}, config("t"))
    Tract.clone(a, b).close()
    with TractkvSaver.from_path(a) as saver:
        chat_graph(saver).invoke({"messages": [HumanMessage(content="on a")]}, config("t"))
    with TractkvSaver.from_path(b) as saver:
        chat_graph(saver).invoke({"messages": [HumanMessage(content="on b")]}, config("t"))
        before = {c.config["configurable"]["checkpoint_id"] for c in saver.list(config("t"))}
    with TractkvSaver.from_path(a) as saver:
        theirs = {c.config["configurable"]["checkpoint_id"] for c in saver.list(config("t"))}
    with Tract.open(b, branch=thread_branch("t")) as t:
        assert t.pull("origin", thread_branch("t")).kind == "merge"
    with TractkvSaver.from_path(b) as saver:
        after = {c.config["configurable"]["checkpoint_id"] for c in saver.list(config("t"))}
        assert after == before | theirs  # the other machine's checkpoints are read too (first parents: not)
        state = chat_graph(saver).get_state(config("t"))
        assert state.values["messages"][-2].content in ("on a", "on b")  # the newest checkpoint of either


def test_delete_thread_uses_the_branch_delete_and_refuses_a_checked_out_thread(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tractkv.cli import cli
    from tractkv.engine.budget import stored_budget
    from tractkv.engine.history import HEADS

    store = str(tmp_path / "s")
    with TractkvSaver.from_path(store) as saver:
        chat_graph(saver).invoke({"messages": [HumanMessage(content="x")]}, config("t"))
    with Tract.open(store) as t:
        t.commit({"type": "dialogue", "role": "user", "text": "on main"})
    with Tract.open(store, branch=thread_branch("t")) as t:
        t.set_budget(1000)  # a branch setting the branch delete drops with the branch
    # `tractkv switch` leaves the store's HEAD on the thread: deleting it is refused, nothing changes
    assert CliRunner().invoke(cli, ["--store", store, "switch", thread_branch("t")]).exit_code == 0
    with TractkvSaver.from_path(store) as saver:
        with pytest.raises(InvalidInput, match="checked out"):
            saver.delete_thread("t")
        assert saver.get_tuple(config("t")) is not None
    assert CliRunner().invoke(cli, ["--store", store, "switch", "main"]).exit_code == 0
    with TractkvSaver.from_path(store) as saver:
        saver.delete_thread("t")
        assert saver.get_tuple(config("t")) is None
        assert stored_budget(saver.tract.store, HEADS + thread_branch("t")) is None
    result = CliRunner().invoke(cli, ["--store", store, "branch"])
    assert result.exit_code == 0
    assert "langgraph/t" not in result.output


def test_copy_thread_and_prune_delete(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    with TractkvSaver.from_path(store) as saver:
        app = chat_graph(saver)
        app.invoke({"messages": [HumanMessage(content="one")]}, config("src"))
        saver.copy_thread("src", "dst")
        out = app.invoke({"messages": [HumanMessage(content="two")]}, config("dst"))  # the copy goes on
        assert texts(out["messages"]) == ["human: one", "ai: sure #1", "human: two", "ai: sure #3"]
        assert len(app.get_state(config("src")).values["messages"]) == 2  # the source did not move
        with pytest.raises(InvalidInput, match="target exists"):
            saver.copy_thread("src", "dst")
        with pytest.raises(InvalidInput, match="prune strategy"):
            saver.prune(["src"], strategy="keep_some")
        saver.prune(["src"], strategy="delete")
        assert saver.get_tuple(config("src")) is None
        assert saver.get_tuple(config("dst")) is not None


def _run(thread: str, run: str) -> Any:
    return {**config(thread), "metadata": {"run_id": run}}


def _objects(tract: Tract) -> set[str]:
    from tractkv.store import Table

    return {bytes(k).hex() for k, _v in tract.store.reader().iter_table(Table.OBJECTS)}


def test_prune_keep_latest_moves_the_branch_and_gc_reclaims_the_rest(tmp_path: Path) -> None:
    with TractkvSaver.from_path(str(tmp_path / "s"), durable=False) as saver:
        app = chat_graph(saver)
        for word in ("one", "two", "three"):
            app.invoke({"messages": [HumanMessage(content=word)]}, config("t"))
        app.invoke({"messages": [HumanMessage(content="other")]}, config("u"))
        before = texts(app.get_state(config("t")).values["messages"])
        old_tip = saver.tract.store.get_ref("refs/heads/langgraph/t")
        history = list(saver.list(config("t")))
        dropped = history[-1]  # the oldest checkpoint: its metadata blob is its own
        saver.prune(["t", "absent"], strategy="keep_latest")
        kept = list(saver.list(config("t")))
        assert [k.config for k in kept] == [history[0].config]
        assert texts(app.get_state(config("t")).values["messages"]) == before
        assert len(list(saver.list(config("u")))) == 3  # another thread is untouched
        moves = [m for m in saver.tract.reflog("langgraph/t", limit=2) if "prune" in m.message]
        assert [m.old for m in moves] == [old_tip]  # the move is in the reflog: undoable until gc
        assert saver.tract.gc(min_age_hours=72).removed_objects == 0  # the reflog keeps it young
        result = saver.tract.gc(min_age_hours=0)
        assert result.removed_objects > 0
        assert fsck(saver.tract.store).ok
        assert saver.get_tuple(dropped.config) is None
        # every message the kept checkpoint reads survived gc (they were linked by the dropped commits)
        out = app.invoke({"messages": [HumanMessage(content="four")]}, config("t"))
        assert texts(out["messages"]) == [*before, "human: four", "ai: sure #7"]
    with TractkvSaver.from_path(str(tmp_path / "s")) as saver:  # a fresh process reads the same
        assert texts(chat_graph(saver).get_state(config("t")).values["messages"])[-1] == "ai: sure #7"


def test_delete_for_runs_drops_the_runs_checkpoints_and_writes_only(tmp_path: Path) -> None:
    with TractkvSaver.from_path(str(tmp_path / "s"), durable=False) as saver:
        app = chat_graph(saver)
        app.invoke({"messages": [HumanMessage(content="one")]}, _run("t", "run-1"))
        app.invoke({"messages": [HumanMessage(content="two")]}, _run("t", "run-2"))
        app.invoke({"messages": [HumanMessage(content="solo")]}, _run("u", "run-1"))
        app.invoke({"messages": [HumanMessage(content="keep")]}, _run("v", "run-3"))
        latest = texts(app.get_state(config("t")).values["messages"])
        saver.delete_for_runs([])  # nothing
        saver.delete_for_runs(["run-1", "never"])
        runs = {t.metadata.get("run_id") for t in saver.list(config("t"))}
        assert runs == {"run-2"}
        assert saver.get_tuple(config("u")) is None  # every checkpoint of u was run-1's: its branch went
        assert "langgraph/u" not in [b.name for b in saver.tract.list_branches()]
        assert len(list(saver.list(config("v")))) == 3
        saver.tract.gc(min_age_hours=0)
        assert fsck(saver.tract.store).ok
        # run-2's checkpoints extend run-1's message list: what they read survived gc
        assert texts(app.get_state(config("t")).values["messages"]) == latest
        out = app.invoke({"messages": [HumanMessage(content="three")]}, _run("t", "run-4"))
        assert texts(out["messages"])[-2:] == ["human: three", "ai: sure #5"]


def test_a_rewrite_refuses_a_branch_holding_commits_it_did_not_write(tmp_path: Path) -> None:
    with TractkvSaver.from_path(str(tmp_path / "s"), durable=False) as saver:
        app = chat_graph(saver)
        for word in ("one", "two"):
            app.invoke({"messages": [HumanMessage(content=word)]}, config("t"))
        other = Tract.open(str(tmp_path / "s"), durable=False)
        try:
            other.switch("langgraph/t")
            other.user("a note of my own")
            other.branch("elsewhere")
        finally:
            other.close()
        tip = saver.tract.store.get_ref("refs/heads/langgraph/t")
        with pytest.raises(InvalidInput, match="not a LangGraph checkpoint"):
            saver.prune(["t"], strategy="keep_latest")
        assert saver.tract.store.get_ref("refs/heads/langgraph/t") == tip  # nothing moved


def test_a_thread_id_too_long_for_a_branch_name_is_refused_before_the_graph_runs(tmp_path: Path) -> None:
    with TractkvSaver.from_path(str(tmp_path / "s")) as saver:
        app = chat_graph(saver)
        with pytest.raises(InvalidInput, match="too long for a branch name"):
            app.invoke({"messages": [HumanMessage(content="hi")]}, config("é" * 100))
        assert [b.name for b in saver.tract.list_branches()] in ([], ["main"])  # nothing written
        long_ascii = "x" * 200  # the longest id kept as is, with room for subgraph namespaces
        out = subgraph_graph(saver).invoke({"messages": [HumanMessage(content="nested")]}, config(long_ascii))
        assert "__interrupt__" in out


def test_a_turn_copies_and_compares_only_the_new_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per-turn cost flat in the thread's length: a read hands out the objects it handed out before (checked
    in one C-speed pass, not copied), and a put compares no message in Python when its list starts with
    the objects the saver handed out (the old code copied every message on each read and compared each
    one in Python on each put)."""
    import tractkv.integrations.langgraph as lg

    calls = {"fresh": 0, "same": 0}
    fresh, same = lg._fresh, lg._same

    def counting_fresh(message: Any) -> Any:
        calls["fresh"] += 1
        return fresh(message)

    def counting_same(a: Any, b: Any) -> bool:
        calls["same"] += 1
        return same(a, b)

    with TractkvSaver.from_path(str(tmp_path / "s"), durable=False) as saver:
        app = react_graph(saver)
        for turn in range(30):
            app.invoke({"messages": [HumanMessage(content=f"city {turn}")]}, config("t"))
        monkeypatch.setattr(lg, "_fresh", counting_fresh)
        monkeypatch.setattr(lg, "_same", counting_same)
        for turn in range(5):
            app.invoke({"messages": [HumanMessage(content=f"city x{turn}")]}, config("t"))
        assert calls["same"] == 0
        assert calls["fresh"] <= 5 * 4  # the new messages only (the saver's own copies), not 120+ a turn
        first = app.get_state(config("t")).values["messages"]
        again = app.get_state(config("t")).values["messages"]
        assert len(first) == 140
        assert all(a is b for a, b in zip(first, again, strict=True))
        first[0].content = "MUTATED"  # what a read returned is edited: the next read has the stored one
        third = app.get_state(config("t")).values["messages"]
        assert third[0].content == "city 0"
        assert third[0] is not first[0]
        assert third[1] is first[1]


# --- the thread's conversation as commits -------------------------------------------------------------------


def _react_thread(path: Path, thread: str = "t") -> None:
    with TractkvSaver.from_path(str(path), durable=False) as saver:
        app = react_graph(saver)
        app.invoke({"messages": [HumanMessage(content="Paris")]}, config(thread))
        app.invoke({"messages": [HumanMessage(content="Atlantis")]}, config(thread))


EXPECTED_CONVERSATION = [
    ("user", "Paris", [], None),
    ("assistant", "Let me look.", [("call_1", "lookup", {"city": "Paris"})], None),
    ("tool", "sunny in Paris", [], "call_1"),
    ("assistant", "It is sunny in Paris.", [], None),
    ("user", "Atlantis", [], None),
    ("assistant", "Let me look.", [("call_2", "lookup", {"city": "Atlantis"})], None),
    ("tool", "Error: ValueError('no such city')\n Please fix your mistakes.", [], "call_2"),
    ("assistant", "It is Error: ValueError('no such city')\n Please fix your mistakes..", [], None),
]


def _conversation(t: Tract) -> list[Any]:
    return [
        (m.role, m.content, [(c.id, c.name, c.arguments) for c in m.tool_calls], m.tool_call_id)
        for m in t.compile().messages
    ]


def test_a_react_graph_leaves_its_conversation_on_the_branch(tmp_path: Path) -> None:
    """The messages channel is the branch's conversation: compile (every dialect), tool queries, log."""
    from click.testing import CliRunner

    from tractkv.cli import cli

    _react_thread(tmp_path / "s")
    with Tract.open(str(tmp_path / "s")) as t:
        t.switch("langgraph/t")
        assert _conversation(t) == EXPECTED_CONVERSATION  # the old code: [] (hidden checkpoint notes only)
        ctx = t.compile()
        openai = ctx.to_openai_params()["messages"]
        assert openai[1]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"city":"Paris"}'}
        assert openai[2] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny in Paris"}
        anthropic = ctx.to_anthropic_params()["messages"]
        assert anthropic[1]["content"][1] == {
            "type": "tool_use",
            "id": "call_1",
            "name": "lookup",
            "input": {"city": "Paris"},
        }
        results = [
            block
            for message in anthropic
            if isinstance(message["content"], list)
            for block in message["content"]
            if block["type"] == "tool_result"
        ]
        assert [(r["tool_use_id"], r.get("is_error", False)) for r in results] == [
            ("call_1", False),
            ("call_2", True),
        ]
        responses = ctx.to_responses_params()["input"]
        assert {"type": "function_call_output", "call_id": "call_1", "output": "sunny in Paris"} in responses
        gemini = ctx.to_gemini_params()["contents"]
        assert gemini[1]["parts"][1]["function_call"]["args"] == {"city": "Paris"}
        turns = t.find_tool_turns()
        assert [(turn.tool_names, [r.content["text"] for r in turn.results]) for turn in turns] == [
            (("lookup",), ["sunny in Paris"]),
            (("lookup",), ["Error: ValueError('no such city')\n Please fix your mistakes."]),
        ]
        assert turns[1].results[0].content.get("is_error") is True
        assert [c.content["tool_calls"][0]["name"] for c in t.find_tool_calls()] == ["lookup", "lookup"]
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "log", "langgraph/t", "-n", "60"])
    assert result.exit_code == 0, result.output
    assert "sunny in Paris" in result.output
    assert "lookup" in result.output
    with TractkvSaver.from_path(str(tmp_path / "s")) as saver:  # what LangGraph reads is unchanged
        state = react_graph(saver).get_state(config("t")).values["messages"]
        assert [m.type for m in state] == ["human", "ai", "tool", "ai"] * 2
        assert state[6].status == "error"


def test_the_viewer_shows_the_threads_tool_calls(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from tractkv.store import LmdbStore
    from tractkv.view.app import create_app

    _react_thread(tmp_path / "s")
    with LmdbStore(str(tmp_path / "s")) as st:
        tip = st.get_ref("refs/heads/langgraph/t")
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            page = c.get(f"/ui/commit/{tip}?ref=refs/heads/langgraph/t")
            assert page.status_code == 200
            for text in ("lookup", "sunny in Paris", "no such city", "It is sunny in Paris."):
                assert text in page.text, text


def _editing_graph(saver: TractkvSaver) -> Any:
    from langchain_core.messages import AIMessage, RemoveMessage
    from langgraph.graph import START, MessagesState, StateGraph

    def model(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if last.content == "forget the first":
            return {"messages": [RemoveMessage(id=state["messages"][0].id), AIMessage(content="forgotten")]}
        if last.content == "fix your answer":
            answer = state["messages"][1]  # replaced by id: a new object with the same id
            return {"messages": [AIMessage(content="corrected", id=answer.id), AIMessage(content="done")]}
        return {"messages": [AIMessage(content=f"echo {last.content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_edge(START, "model")
    return builder.compile(checkpointer=saver)


def test_replaced_and_removed_messages_edit_and_hide_their_commits(tmp_path: Path) -> None:
    with TractkvSaver.from_path(str(tmp_path / "s"), durable=False) as saver:
        app = _editing_graph(saver)
        for text in ("hello", "fix your answer", "forget the first"):
            out = app.invoke({"messages": [HumanMessage(content=text)]}, config("t"))
        assert texts(out["messages"]) == [
            "ai: corrected",
            "human: fix your answer",
            "ai: done",
            "human: forget the first",
            "ai: forgotten",
        ]
    with Tract.open(str(tmp_path / "s")) as t:
        t.switch("langgraph/t")
        assert [(m.role, m.content) for m in t.compile().messages] == [
            ("assistant", "corrected"),
            ("user", "fix your answer"),
            ("assistant", "done"),
            ("user", "forget the first"),
            ("assistant", "forgotten"),
        ]
        ops = [c.operation for c in t.log(limit=200)]
        assert "edit" in ops
        assert "annotate" in ops


def test_time_travel_shows_the_forked_conversation(tmp_path: Path) -> None:
    with TractkvSaver.from_path(str(tmp_path / "s"), durable=False) as saver:
        app = chat_graph(saver)
        app.invoke({"messages": [HumanMessage(content="one")]}, config("t"))
        fork_at = app.get_state(config("t")).config
        app.invoke({"messages": [HumanMessage(content="two")]}, config("t"))
        app.invoke({"messages": [HumanMessage(content="other")]}, fork_at)
        assert texts(app.get_state(config("t")).values["messages"]) == [
            "human: one",
            "ai: sure #1",
            "human: other",
            "ai: sure #3",
        ]
    with Tract.open(str(tmp_path / "s")) as t:
        t.switch("langgraph/t")
        assert [m.content for m in t.compile().messages] == ["one", "sure #1", "other", "sure #3"]


def test_a_thread_written_before_reads_as_before_and_a_write_brings_its_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread the previous release wrote (the same checkpoint and writes commits, no message commits:
    written here by this saver with the conversation turned off) reads unchanged; the first write adds
    every message of the thread to the conversation, in order."""
    import tractkv.integrations.langgraph as lg

    with monkeypatch.context() as patch:
        patch.setattr(lg, "MESSAGES", "no channel has this name")
        _react_thread(tmp_path / "s")
    with Tract.open(str(tmp_path / "s")) as t:
        t.switch("langgraph/t")
        assert t.compile().messages == []  # what the previous release left
    with TractkvSaver.from_path(str(tmp_path / "s"), durable=False) as saver:
        app = react_graph(saver)
        state = app.get_state(config("t")).values["messages"]
        assert [m.type for m in state] == ["human", "ai", "tool", "ai"] * 2
        app.invoke({"messages": [HumanMessage(content="Rome")]}, config("t"))
    with Tract.open(str(tmp_path / "s")) as t:
        t.switch("langgraph/t")
        conversation = _conversation(t)
        assert conversation[:8] == EXPECTED_CONVERSATION
        assert [c[0] for c in conversation[8:]] == ["user", "assistant", "tool", "assistant"]
        assert len(t.find_tool_turns()) == 3
        assert fsck(t.store).ok


def test_pruning_keeps_the_conversation_of_the_latest_checkpoint(tmp_path: Path) -> None:
    with TractkvSaver.from_path(str(tmp_path / "s"), durable=False) as saver:
        app = react_graph(saver)
        app.invoke({"messages": [HumanMessage(content="Paris")]}, _run("t", "run-1"))
        app.invoke({"messages": [HumanMessage(content="Atlantis")]}, _run("t", "run-2"))
        saver.delete_for_runs(["run-2"])  # the thread is back to run-1's state, and so is its conversation
        with Tract.open(str(tmp_path / "s"), durable=False) as t:
            t.switch("langgraph/t")
            assert _conversation(t) == EXPECTED_CONVERSATION[:4]
        app.invoke({"messages": [HumanMessage(content="Atlantis")]}, _run("t", "run-3"))
        saver.prune(["t"], strategy="keep_latest")
        assert len(list(saver.list(config("t")))) == 1
        saver.tract.gc(min_age_hours=0)
        assert fsck(saver.tract.store).ok
        with Tract.open(str(tmp_path / "s"), durable=False) as t:
            t.switch("langgraph/t")
            conversation = _conversation(t)
            assert [c[0] for c in conversation] == ["user", "assistant", "tool", "assistant"] * 2
            assert [c[3] for c in conversation if c[0] == "tool"] == ["call_1", "call_2"]
            # the history keeps run-2's hidden turn too (its skip annotation is in the log)
            assert len(t.find_tool_turns()) == 3
