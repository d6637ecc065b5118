"""LangGraph graphs the integration tests run, in the test process or in a fresh one.

As a script: ``python lg_app.py STORE COMMAND THREAD ARG`` prints one JSON line:

* ``turn``: one chat turn (a user message ARG, the fake model's reply); prints the thread's messages.
* ``start``: the review graph up to its interrupt (the draft answers ARG); prints the interrupt's value.
* ``resume``: resume the review graph with the decision ARG; prints the thread's messages.
* ``state``: prints the thread's messages and the nodes it waits for.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt

from tractkv.integrations.langgraph import TractkvSaver


def _reply(state: MessagesState) -> dict[str, Any]:
    model = FakeListChatModel(responses=["sure"])  # a fake chat model: no network
    answer = model.invoke(state["messages"])
    return {"messages": [AIMessage(content=f"{answer.content} #{len(state['messages'])}")]}


def chat_graph(saver: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("model", _reply)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    return builder.compile(checkpointer=saver)


def _review(state: MessagesState) -> dict[str, Any]:
    decision = interrupt({"draft": state["messages"][-1].content})
    return {"messages": [AIMessage(content=f"{decision}: {state['messages'][-1].content}")]}


def review_graph(saver: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("draft", _reply)
    builder.add_node("review", _review)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=saver)


def subgraph_graph(saver: Any) -> Any:
    """A parent graph whose node is a compiled subgraph that interrupts (checkpoint namespaces)."""
    inner = StateGraph(MessagesState)
    inner.add_node("draft", _reply)
    inner.add_node("review", _review)
    inner.add_edge(START, "draft")
    inner.add_edge("draft", "review")
    inner.add_edge("review", END)
    outer = StateGraph(MessagesState)
    outer.add_node("inner", inner.compile())
    outer.add_node("model", _reply)
    outer.add_edge(START, "inner")
    outer.add_edge("inner", "model")
    outer.add_edge("model", END)
    return outer.compile(checkpointer=saver)


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    if city == "Atlantis":
        raise ValueError("no such city")
    return f"sunny in {city}"


class ToolCallingModel(BaseChatModel):
    """A fake chat model bound to tools (no network): asked by a user, it calls ``lookup`` with the user's
    text as the city; given the tool's result, it answers with it. ``bind_tools`` returns itself."""

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=[{"type": "text", "text": f"It is {last.content}."}])
        else:
            turn = sum(isinstance(m, HumanMessage) for m in messages)
            reply = AIMessage(
                content="Let me look.",
                tool_calls=[{"id": f"call_{turn}", "name": "lookup", "args": {"city": str(last.content)}}],
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @property
    def _llm_type(self) -> str:
        return "tool-calling-fake"

    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self


def react_graph(saver: Any) -> Any:
    """A ``create_react_agent``-style graph: a system prompt, the fake model bound to ``lookup``, a ToolNode
    (errors become ``status="error"`` tool messages), looping until the model answers without a call."""
    model = ToolCallingModel().bind_tools([lookup])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {
            "messages": [
                model.invoke([SystemMessage(content="You answer weather questions."), *state["messages"]])
            ]
        }

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup], handle_tool_errors=True))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def texts(messages: list[BaseMessage]) -> list[str]:
    return [f"{m.type}: {m.content}" for m in messages]


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def main(argv: list[str]) -> None:
    store, command, thread, arg = argv
    with TractkvSaver.from_path(store) as saver:
        if command == "turn":
            out = chat_graph(saver).invoke({"messages": [HumanMessage(content=arg)]}, config(thread))
            print(json.dumps(texts(out["messages"])))
        elif command == "start":
            out = review_graph(saver).invoke({"messages": [HumanMessage(content=arg)]}, config(thread))
            print(json.dumps([i.value for i in out["__interrupt__"]]))
        elif command == "resume":
            out = review_graph(saver).invoke(Command(resume=arg), config(thread))
            print(json.dumps(texts(out["messages"])))
        elif command == "state":
            snapshot = review_graph(saver).get_state(config(thread))
            print(json.dumps({"messages": texts(snapshot.values.get("messages", [])), "next": snapshot.next}))
        else:
            raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
