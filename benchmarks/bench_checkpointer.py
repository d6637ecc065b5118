"""LangGraph checkpointer benchmark: tractkv's ``TractkvSaver`` against LangGraph's ``SqliteSaver``.

Run: ``python benchmarks/bench_checkpointer.py [--sizes 1000,5000] [--chars 200] [--tool-turns 1000] [--tmp DIR]``
(``--sizes 0`` or ``--tool-turns 0`` skips that part).
Each case prints one JSON line to stdout; notices go to stderr.

One conversation per size: a ``MessagesState`` graph with one node answering from a fake chat model (no
network), invoked once per user message on one thread, so each turn adds two messages (the user's and the
model's, ``--chars`` characters each) and LangGraph writes three checkpoints and two sets of writes per turn
(what a chat app on LangGraph does). Both savers run the same graph in the same run, one after the other,
each on a fresh file: tractkv first, then SQLite (``SqliteSaver`` over ``sqlite3.connect``, WAL, as
``from_conn_string`` opens it). The machine is shared: compare the ratio within one run, and read the load
average printed with it.

Cases, for each size N (messages):

* ``checkpointer_ms_per_message``: wall time of the whole conversation divided by N (ms). Value: tractkv;
  baseline: SQLite; ratio value / baseline; target <= 1.0 (tractkv no slower).
* ``checkpointer_ms_per_message_nondurable``: the same with tractkv opened ``durable=False`` (fsync off:
  survives a process crash, not an OS crash), against the same SQLite run. Target ratio <= 1.0.
* ``checkpointer_bytes``: bytes on disk at the end (tractkv: the LMDB pages in use, ``Store.size_bytes()``;
  SQLite: the database file plus its WAL), in MB. Target ratio <= 0.1: SQLite stores every checkpoint's
  whole message list (O(N^2)), tractkv each message once (O(N)).

A **tool graph** (``--tool-turns`` T): a ``create_react_agent``-style graph (an agent node calling a fake chat
model bound to one tool, a ``ToolNode``, ``tools_condition``; a system prompt the agent node adds to each model
call), invoked once per user message on one thread; each turn adds four messages (the user's, the model's tool
call, the tool's result, the model's answer) and LangGraph writes five checkpoints and four sets of writes.

* ``checkpointer_tool_turn_growth``: the mean time of the last 10% of turns divided by that of the first 10%
  (how per-turn cost grows with the thread). Value: tractkv (durable); baseline: SQLite's own growth; target:
  value <= 1.5 (flat). For scale, ``langgraph_alone_*``: the same graph over a saver that keeps checkpoints by
  reference in memory (no copy, no serialization, no disk): LangGraph's and LangChain's own per-turn work,
  which grows with the thread too (its reducer and the chat model's input handling walk every message).
* ``checkpointer_tool_ms_per_turn``: wall time per turn (ms), tractkv against SQLite; target ratio <= 1.0.
* ``checkpointer_tool_bytes``: bytes on disk at the end (MB); target ratio <= 0.1.

Both sides make each write durable as they do by default: tractkv fsyncs every commit (``durable=True``),
SQLite in WAL mode at its default ``synchronous=FULL`` syncs the WAL at every transaction commit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SMOKE_ARGS = ["--sizes", "20", "--tool-turns", "10"]
TARGETS = {
    "checkpointer_ms_per_message": 1.0,
    "checkpointer_ms_per_message_nondurable": 1.0,
    "checkpointer_bytes": 0.1,
    "checkpointer_tool_turn_growth": 1.5,
    "checkpointer_tool_ms_per_turn": 1.0,
    "checkpointer_tool_bytes": 0.1,
}


def _graph(saver: Any, chars: int) -> Any:
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    filler = "x" * max(0, chars - 20)

    def model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"reply {len(state['messages'])} {filler}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_edge(START, "model")
    return builder.compile(checkpointer=saver)


def _converse(saver: Any, messages: int, chars: int) -> float:
    from langchain_core.messages import HumanMessage

    graph = _graph(saver, chars)
    config = {"configurable": {"thread_id": "bench"}}
    filler = "y" * max(0, chars - 20)
    start = time.perf_counter()
    for turn in range(messages // 2):
        out = graph.invoke({"messages": [HumanMessage(content=f"user {turn} {filler}")]}, config)
    elapsed = time.perf_counter() - start
    assert len(out["messages"]) == messages // 2 * 2
    return elapsed


def _tool_graph(saver: Any, chars: int) -> Any:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    filler = "z" * max(0, chars - 30)

    @tool
    def lookup(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city[:20]} {filler}"

    class Model(BaseChatModel):
        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            last = messages[-1]
            if isinstance(last, ToolMessage):
                reply = AIMessage(content=f"It is {last.content}")
            else:
                reply = AIMessage(
                    content=f"Looking it up. {filler}",
                    tool_calls=[
                        {"id": f"call_{len(messages)}", "name": "lookup", "args": {"city": last.content}}
                    ],
                )
            return ChatResult(generations=[ChatGeneration(message=reply)])

        @property
        def _llm_type(self) -> str:
            return "bench-fake"

    model = Model()
    system = SystemMessage(content="You answer weather questions.")

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([system, *state["messages"]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def _tool_turns(saver: Any, turns: int, chars: int) -> list[float]:
    """Seconds per turn of the tool graph on one thread."""
    from langchain_core.messages import HumanMessage

    graph = _tool_graph(saver, chars)
    config = {"configurable": {"thread_id": "bench-tools"}}
    filler = "w" * max(0, chars - 20)
    out: list[float] = []
    for turn in range(turns):
        start = time.perf_counter()
        state = graph.invoke({"messages": [HumanMessage(content=f"city {turn} {filler}")]}, config)
        out.append(time.perf_counter() - start)
    assert len(state["messages"]) == 4 * turns
    return out


def _floor_saver() -> Any:
    """LangGraph's own cost, for scale: a saver that keeps each checkpoint by reference (no copy, no
    serialization, no disk; not a usable saver: what a read returns shares everything with what was put)."""
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

    class Floor(BaseCheckpointSaver[str]):
        def __init__(self) -> None:
            super().__init__()
            self.saved: dict[str, Any] = {}
            self.latest: str | None = None
            self.writes: dict[str, list[Any]] = {}

        def get_tuple(self, config: Any) -> Any:
            wanted = config["configurable"].get("checkpoint_id") or self.latest
            if wanted is None:
                return None
            checkpoint, metadata = self.saved[wanted]
            checkpoint = {**checkpoint, "channel_values": dict(checkpoint["channel_values"])}
            conf = {"configurable": {**config["configurable"], "checkpoint_ns": "", "checkpoint_id": wanted}}
            return CheckpointTuple(conf, checkpoint, metadata, None, self.writes.get(wanted, []))

        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            self.saved[checkpoint["id"]] = (checkpoint, metadata)
            self.latest = checkpoint["id"]
            return {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}

        def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            self.writes.setdefault(config["configurable"]["checkpoint_id"], []).extend(
                (task_id, channel, value) for channel, value in writes
            )

    return Floor()


def _growth(times: list[float]) -> tuple[float, float]:
    """Mean seconds of the first and the last 10% of turns (at least one turn each)."""
    tenth = max(1, len(times) // 10)
    return sum(times[:tenth]) / tenth, sum(times[-tenth:]) / tenth


def _tool_case(scratch: Path, turns: int, chars: int, load: tuple[float, ...]) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from tractkv.integrations.langgraph import TractkvSaver

    with TractkvSaver.from_path(str(scratch / f"tools{turns}")) as saver:
        t_times = _tool_turns(saver, turns, chars)
        t_bytes = saver.tract.store.size_bytes()
    path = scratch / f"tools{turns}.db"
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        s_times = _tool_turns(SqliteSaver(conn), turns, chars)
    finally:
        conn.close()
    s_bytes = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    f_first, f_last = _growth(_tool_turns(_floor_saver(), turns, chars))
    extra = {"load": [round(x, 2) for x in (*load, *os.getloadavg())], "chars": chars}
    (t_first, t_last), (s_first, s_last) = _growth(t_times), _growth(s_times)
    growth = t_last / t_first
    row = {
        "case": "checkpointer_tool_turn_growth",
        "n": turns,
        "unit": "x",
        "value": round(growth, 4),
        "baseline": round(s_last / s_first, 4),
        "ratio": round(growth, 4),
        "target": TARGETS["checkpointer_tool_turn_growth"],
        "target_of": "value",
        "ok": growth <= TARGETS["checkpointer_tool_turn_growth"],
        "tractkv_x": round(growth, 4),
        "baseline_x": round(s_last / s_first, 4),
        "first_ms": round(t_first * 1000, 3),
        "last_ms": round(t_last * 1000, 3),
        "baseline_first_ms": round(s_first * 1000, 3),
        "baseline_last_ms": round(s_last * 1000, 3),
        "langgraph_alone_growth": round(f_last / f_first, 4),
        "langgraph_alone_first_ms": round(f_first * 1000, 3),
        "langgraph_alone_last_ms": round(f_last * 1000, 3),
        **extra,
    }
    print(json.dumps(row))
    per = 1000 / turns
    print(
        _line("checkpointer_tool_ms_per_turn", turns, "ms", sum(t_times) * per, sum(s_times) * per, **extra)
    )
    print(_line("checkpointer_tool_bytes", turns, "mb", t_bytes / 1e6, s_bytes / 1e6, **extra))
    sys.stdout.flush()
    print(
        f"tool graph, {turns} turns: tractkv {sum(t_times):.1f} s, sqlite {sum(s_times):.1f} s",
        file=sys.stderr,
    )


def _tractkv(path: Path, messages: int, chars: int, durable: bool) -> tuple[float, int]:
    from tractkv.integrations.langgraph import TractkvSaver

    with TractkvSaver.from_path(str(path), durable=durable) as saver:
        elapsed = _converse(saver, messages, chars)
        size = saver.tract.store.size_bytes()
    return elapsed, size


def _sqlite(path: Path, messages: int, chars: int) -> tuple[float, int]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        elapsed = _converse(SqliteSaver(conn), messages, chars)
    finally:
        conn.close()
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    return elapsed, size


def _line(case: str, n: int, unit: str, value: float, baseline: float, **extra: Any) -> str:
    ratio = value / baseline if baseline else None
    target = TARGETS[case]
    row = {
        "case": case,
        "n": n,
        "unit": unit,
        "value": round(value, 4),
        "baseline": round(baseline, 4),
        "ratio": round(ratio, 4) if ratio is not None else None,
        "target": target,
        "target_of": "ratio",
        "ok": ratio is not None and ratio <= target,
        f"tractkv_{unit}": round(value, 4),
        f"baseline_{unit}": round(baseline, 4),
        **extra,
    }
    return json.dumps(row)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--chars", type=int, default=200)
    parser.add_argument("--tool-turns", type=int, default=1000)
    parser.add_argument("--tmp", default=None)
    args = parser.parse_args(argv)
    load = os.getloadavg()
    scratch = Path(tempfile.mkdtemp(prefix="bench_checkpointer_", dir=args.tmp))
    try:
        for n in (int(s) for s in args.sizes.split(",") if int(s) > 0):
            t_s, t_bytes = _tractkv(scratch / f"tractkv{n}", n, args.chars, True)
            f_s, _bytes = _tractkv(scratch / f"tractkv{n}-nondurable", n, args.chars, False)
            s_s, s_bytes = _sqlite(scratch / f"sqlite{n}.db", n, args.chars)
            extra = {"load": [round(x, 2) for x in (*load, *os.getloadavg())], "chars": args.chars}
            per = 1000 / n
            print(_line("checkpointer_ms_per_message", n, "ms", t_s * per, s_s * per, **extra))
            print(_line("checkpointer_ms_per_message_nondurable", n, "ms", f_s * per, s_s * per, **extra))
            print(_line("checkpointer_bytes", n, "mb", t_bytes / 1e6, s_bytes / 1e6, **extra))
            sys.stdout.flush()
            print(f"n={n}: tractkv {t_s:.1f} s ({f_s:.1f} s nondurable), sqlite {s_s:.1f} s", file=sys.stderr)
            load = os.getloadavg()
        if args.tool_turns > 0:
            _tool_case(scratch, args.tool_turns, args.chars, load)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
