"""tractkv.aio.AsyncTract: the facade as coroutines that never block the event loop, against the recorder.

The loop-not-blocked tests run a ticker coroutine beside the operation and measure the longest gap between
its ticks; each also runs the same work the blocking way, to show the measurement catches a blocked loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import itertools
import subprocess
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from tractkv import Tract
from tractkv.aio import AsyncTract
from tractkv.errors import (
    ConcurrentUpdate,
    InvalidInput,
    LLMError,
    ModelCallFailed,
    NoLLMConfigured,
    StoreClosed,
)
from tractkv.llm import AnthropicClient, OpenAIClient, ScriptedLLM
from tractkv.store.fsck import fsck

from .conftest import Recorder, anthropic_message, openai_completion, openai_events
from .test_streaming import PROVIDERS, fresh, ticking_clock

TICK = 0.005


async def longest_gap(work: Awaitable[Any]) -> tuple[float, float, Any]:
    """Run ``work`` beside a ticker: (the longest gap between ticks, how long the work took, its result)."""
    ticks: list[float] = []
    done = False

    async def ticker() -> None:
        while not done:
            ticks.append(time.monotonic())
            await asyncio.sleep(TICK)

    # A collection of the cyclic GC holds the GIL in whatever thread runs it: in a long test session (a large
    # heap) one can take a second. It pauses the loop whether or not the store blocks it, so the objects
    # made before the measurement are moved out of the collector's sight while it runs.
    gc.collect()
    gc.freeze()
    task = asyncio.create_task(ticker())
    await asyncio.sleep(TICK * 2)
    started = time.monotonic()
    try:
        result = await work
    finally:
        ticks.append(time.monotonic())  # the earliest the ticker could tick again
        took = time.monotonic() - started
        done = True
        await task
        gc.unfreeze()
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    return max(gaps), took, result


def many_commits(t: Tract, n: int = 10_000) -> int:
    with t.batch():
        for i in range(n):
            t.user(f"message {i} " + "word " * 20)
    return len(t.compile().messages)


def test_a_long_store_operation_does_not_block_the_loop(tmp_path: Path) -> None:
    async def main() -> None:
        async with await AsyncTract.open(str(tmp_path / "s")) as at:
            gap, took, count = await longest_gap(at.call(many_commits))
            assert count == 10_000
            assert took > 0.15  # long enough to mean something
            assert gap < took / 4, (gap, took)
            # the measurement catches a blocked loop: the same work done on the loop
            t = at.tract

            async def blocking() -> int:
                return many_commits(t)

            blocked_gap, blocked_took, _ = await longest_gap(blocking())
            assert blocked_gap >= blocked_took * 0.9

    asyncio.run(main())


def test_a_slow_model_stream_does_not_block_the_loop(recorder: Recorder, provider: str) -> None:
    make, reply, events = PROVIDERS[provider]
    client = make(recorder)
    recorder.stream(events(reply()), pause=0.02)

    async def main() -> None:
        at = AsyncTract(fresh())
        stream = await at.generate(client, stream=True)

        async def consume() -> int:
            return len([d async for d in stream])

        gap, took, count = await longest_gap(consume())
        assert count > 6
        assert took > 0.2
        assert gap < took / 3, (gap, took)
        assert stream.commit is not None
        assert await at.head() == stream.commit.commit_id
        await at.close()

    asyncio.run(main())
    recorder.stream(events(reply()), pause=0.02)  # the sync stream, on the loop, blocks it: the check works

    async def blocking() -> None:
        stream = fresh().generate(client, stream=True)
        for _ in stream:
            pass

    gap, took, _ = asyncio.run(longest_gap(blocking()))
    assert gap >= took * 0.9


@pytest.fixture(params=sorted(PROVIDERS))
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_async_generate_commits_what_sync_generate_commits(recorder: Recorder, provider: str) -> None:
    make, reply, events = PROVIDERS[provider]
    client = make(recorder)
    recorder.reply(reply())
    want = fresh().generate(client, temperature=0.2)
    recorder.reply(reply())
    recorder.stream(events(reply()))

    async def main() -> tuple[Any, Any]:
        at = AsyncTract(fresh())
        plain = await at.generate(client, temperature=0.2)
        streamed_at = AsyncTract(fresh())
        stream = await streamed_at.generate(client, stream=True, temperature=0.2)
        deltas = [d async for d in stream]
        assert "".join(d.text for d in deltas if d.type == "text") == stream.response.text
        await client.aclose()
        return plain, stream.commit

    plain, streamed = asyncio.run(main())
    assert plain.commit_id == want.commit_id
    assert streamed.commit_id == want.commit_id
    assert recorder.bodies[1] == recorder.bodies[0]


def test_async_stream_interrupted_commits_nothing(recorder: Recorder, provider: str) -> None:
    make, reply, events = PROVIDERS[provider]
    client = make(recorder)
    recorder.stream(events(reply()), pause=0.01)
    recorder.stream(events(reply()), drop_after=4)
    recorder.stream(events(reply()), pause=0.05)

    async def main() -> None:
        at = AsyncTract(fresh())
        head = await at.head()
        async with await at.generate(client, stream=True) as stream:  # the consumer stops
            async for _ in stream:
                break
        assert stream.commit is None
        with pytest.raises(LLMError, match="broke off"):  # the connection drops
            async for _ in await at.generate(client, stream=True):
                pass
        stream = await at.generate(client, stream=True)  # the consuming task is cancelled

        async def consume() -> None:
            async for _ in stream:
                pass

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.12)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await stream.aclose()
        assert stream.commit is None
        assert await at.head() == head
        assert len(await at.log()) == 2
        await at.close()

    asyncio.run(main())


def test_generate_cancelled_while_the_model_answers_commits_nothing(recorder: Recorder) -> None:
    client = OpenAIClient("m", api="chat", base_url=f"{recorder.url}/v1", api_key="k", max_retries=0)
    recorder.reply(openai_completion("warm"))
    recorder.reply(openai_completion("late"), delay=0.5)
    recorder.reply(openai_completion("late chat"), delay=0.5)
    recorder.reply(openai_completion("on time"))

    async def main() -> None:
        at = AsyncTract(fresh())
        head = await at.head()
        await client.achat((await at.compile()).messages)  # the async SDK client made, its first call done
        for call in (at.generate(client), at.chat("and now?", client)):
            task = asyncio.ensure_future(call)
            await asyncio.sleep(0.15)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await at.head() == head
        await asyncio.sleep(0.6)  # the server's late replies are sent to no one
        assert await at.head() == head
        assert next(c.commit_id for c in await at.log()) == head
        info = await at.generate(client)
        assert info.content["text"] == "on time"
        assert fsck(at.tract.store).ok
        await at.close()

    asyncio.run(main())


def test_cancelled_store_operations_run_whole_or_not_at_all(tmp_path: Path) -> None:
    async def main() -> None:
        at = await AsyncTract.open(str(tmp_path / "s"))
        await at.system("sys")

        def slow_batch(t: Tract) -> None:
            with t.batch():
                for i in range(30):
                    t.user(f"batched {i}")
                    time.sleep(0.005)

        running = asyncio.ensure_future(at.call(slow_batch))
        queued = asyncio.ensure_future(at.user("queued, then cancelled"))
        await asyncio.sleep(0.05)  # the batch is running, the append waits its turn
        running.cancel()
        queued.cancel()
        for task in (running, queued):
            with pytest.raises(asyncio.CancelledError):
                await task
        texts = [m.content for m in (await at.compile()).messages]
        assert texts == ["sys"] + [f"batched {i}" for i in range(30)]  # the running one completed, whole
        assert "queued, then cancelled" not in str(await at.log())
        await at.close()
        with Tract.open(str(tmp_path / "s")) as t:
            assert fsck(t.store).ok
            assert len(t.log()) == 31

    asyncio.run(main())


def test_many_coroutines_appending_all_land(tmp_path: Path) -> None:
    async def main() -> None:
        path = str(tmp_path / "s")
        at = await AsyncTract.open(path)
        await asyncio.gather(*(at.user(f"m{i}") for i in range(200)))
        log = await at.log()
        assert sorted(str(c.content["text"]) for c in log) == sorted(f"m{i}" for i in range(200))
        # two handles on one store: each serializes its own writes; the store, the two (a branch move is a
        # compare-and-swap: the loser of a race gets ConcurrentUpdate with nothing written, and tries again)
        other = await AsyncTract.open(path)

        async def append(handle: AsyncTract, text: str) -> None:
            for _attempt in range(500):
                with contextlib.suppress(ConcurrentUpdate):
                    await handle.user(text)
                    return
            raise AssertionError(f"{text} never landed")

        await asyncio.gather(
            *(append(at, f"a{i}") for i in range(50)), *(append(other, f"b{i}") for i in range(50))
        )
        await other.close()
        await at.close()
        with Tract.open(path) as t:
            texts = [m.content for m in t.compile().messages]
            assert len(texts) == 300  # every append once: a lost race wrote nothing
            everything = [f"m{i}" for i in range(200)] + [f"a{i}" for i in range(50)]
            assert sorted(texts) == sorted(everything + [f"b{i}" for i in range(50)])
            assert fsck(t.store).ok

    asyncio.run(main())


def test_async_run_drives_the_agent_loop_over_the_async_client(recorder: Recorder) -> None:
    from tractkv.toolkit.executor import ToolExecutor

    client = AnthropicClient("claude-test", base_url=recorder.url, api_key="k", max_retries=0)
    recorder.reply(
        anthropic_message(
            [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]
        )
    )
    recorder.reply(anthropic_message([{"type": "text", "text": "Oslo: rain."}]))

    def get_weather(city: str, *, context: Any) -> str:
        """The weather in a city.

        Args:
            city: the city.
        """
        return f"{city}: rain"

    async def main() -> None:
        at = AsyncTract(fresh())
        executor = ToolExecutor(at.tract, tools=[get_weather])
        result = await at.run(client, executor)
        assert result.stop_reason == "done"
        assert result.text == "Oslo: rain."
        messages = (await at.compile()).messages
        assert [m.role for m in messages][-3:] == ["assistant", "tool", "assistant"]
        assert messages[-2].content == "Oslo: rain"
        await client.aclose()
        await at.close()

    asyncio.run(main())
    assert len(recorder.requests) == 2


def test_a_sync_only_client_runs_in_a_thread_and_errors_are_tractkv_errors() -> None:
    async def main() -> None:
        at = AsyncTract(fresh())
        info = await at.generate(ScriptedLLM(["scripted"]))
        assert info.content["text"] == "scripted"
        reply = await at.chat("again", ScriptedLLM(["twice"]))
        assert reply.content["text"] == "twice"
        with pytest.raises(NoLLMConfigured):
            await at.generate()

        class Broken:
            def chat(self, messages: Any, tools: Any = None, **params: Any) -> Any:
                raise RuntimeError("boom")

        with pytest.raises(ModelCallFailed, match="boom"):
            await at.generate(Broken())
        assert len(await at.log()) == 5  # the two of fresh(), generate's, chat's two
        await at.close()

    asyncio.run(main())


def test_every_facade_operation_has_an_async_form() -> None:
    not_async = {
        "open",
        "close",
        "clone",
        "batch",
    }  # lifecycle is AsyncTract's own; batch goes through call()
    properties = {n for n, v in vars(Tract).items() if isinstance(v, property)}
    public = {n for n in dir(Tract) if not n.startswith("_")} - properties - not_async
    for name in sorted(public):
        assert inspect.iscoroutinefunction(getattr(AsyncTract, name)), name
    for name in ("open", "clone", "close", "head", "current_branch", "call"):
        assert inspect.iscoroutinefunction(getattr(AsyncTract, name)), name


def test_import_tractkv_does_not_load_the_async_module() -> None:
    code = "import sys, tractkv; print(sorted(m for m in sys.modules if m in ('tractkv.aio', 'httpx')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_other_async_operations_pass_through(tmp_path: Path) -> None:
    async def main() -> None:
        at = await AsyncTract.open(str(tmp_path / "s"), clock=ticking_clock())
        await at.user("hi")
        await at.branch("side")
        await at.switch("side")
        assert await at.current_branch() == "side"
        await at.assistant("on side")
        await at.switch("main")
        merged = await at.merge("side")
        assert merged is not None
        assert [m.content for m in (await at.compile()).messages] == ["hi", "on side"]
        await at.close()

    asyncio.run(main())


def test_a_closed_handle_raises_store_closed_and_closes_once(tmp_path: Path) -> None:
    async def main() -> None:
        at = await AsyncTract.open(str(tmp_path / "s"))
        await at.user("kept")
        closing = asyncio.ensure_future(at.close())
        await at.close()  # a second close, while the first runs: nothing to do
        await closing
        await at.close()  # and after it
        for operation in (
            at.user("x"),
            at.head(),
            at.log(),
            at.generate(ScriptedLLM(["r"])),
            at.chat("x", ScriptedLLM(["r"])),
        ):
            with pytest.raises(StoreClosed):
                await operation
        with Tract.open(str(tmp_path / "s")) as t:  # as the sync facade: closed means closed, not broken
            assert len(t.log()) == 1
            t.close()

    asyncio.run(main())


def test_open_cancelled_while_the_store_opens_closes_what_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Tract] = []
    real_open = Tract.open

    def slow_open(*args: Any, **kwargs: Any) -> Tract:
        t = real_open(*args, **kwargs)
        made.append(t)
        time.sleep(0.3)
        return t

    monkeypatch.setattr(Tract, "open", slow_open)

    async def main() -> None:
        task = asyncio.ensure_future(AsyncTract.open(str(tmp_path / "s")))
        await asyncio.sleep(0.1)  # the worker is opening the store
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(100):  # bounded: the open finishes, then the Tract is closed on the worker
            if made and made[0]._session.closed:
                break
            await asyncio.sleep(0.02)
        assert made
        assert made[0]._session.closed

    asyncio.run(main())
    monkeypatch.undo()
    with Tract.open(str(tmp_path / "s"), durable=False) as t:  # the store was released
        assert t.log() == []


def test_a_reply_that_loses_the_race_for_its_branch_is_kept_on_the_error(recorder: Recorder) -> None:
    client = OpenAIClient("m", api="chat", base_url=f"{recorder.url}/v1", api_key="k", max_retries=0)
    recorder.reply(openai_completion("paid for"), delay=0.3)

    async def main() -> None:
        at = AsyncTract(fresh())
        results = await asyncio.gather(at.generate(client), at.user("meanwhile"), return_exceptions=True)
        error = results[0]
        assert isinstance(error, ConcurrentUpdate)
        assert error.response is not None
        assert error.response.text == "paid for"
        info = await at.record_response(error.response.raw)  # what was paid for can still be committed
        assert info.content["text"] == "paid for"
        assert [c.content["text"] for c in (await at.log())[:2]] == ["paid for", "meanwhile"]
        await at.close()

    asyncio.run(main())


def test_sync_generate_keeps_the_reply_on_concurrent_update(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    with Tract.open(path) as first:
        first.user("q")
    with Tract.open(path) as t, Tract.open(path) as other:

        class Racing(ScriptedLLM):
            def chat(self, *args: Any, **kwargs: Any) -> Any:
                other.user("meanwhile")  # another handle moves the branch while the model answers
                return super().chat(*args, **kwargs)

        with pytest.raises(ConcurrentUpdate) as caught:
            t.generate(Racing(["paid for"]))
        assert caught.value.response is not None
        assert caught.value.response.text == "paid for"


def test_a_stream_cancelled_during_its_commit_sets_commit(
    recorder: Recorder, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tractkv.llm.generate as gen

    make, reply, events = PROVIDERS[provider]
    client = make(recorder)
    recorder.stream(events(reply()))
    real = gen.commit_reply

    def slow_commit(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)  # the commit is running on the worker when the consumer is cancelled
        return real(*args, **kwargs)

    monkeypatch.setattr(gen, "commit_reply", slow_commit)

    async def main() -> None:
        at = AsyncTract(fresh())
        stream = await at.generate(client, stream=True)

        async def consume() -> None:
            async for _ in stream:
                pass

        task = asyncio.create_task(consume())
        for _ in range(200):  # bounded: until the reply has arrived and its commit started
            if stream.response is not None:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(100):
            if stream.commit is not None:
                break
            await asyncio.sleep(0.02)
        assert stream.commit is not None
        assert await at.head() == stream.commit.commit_id  # committed, and the stream says so
        await at.close()

    asyncio.run(main())


def test_a_sync_sdk_client_serves_async_calls_in_threads_an_async_one_only_async_calls(
    recorder: Recorder,
) -> None:
    """A client made from keyword arguments has both SDK clients; one given a sync SDK client runs its
    async calls in worker threads (never on the loop); one given an async SDK client refuses the sync calls."""
    import openai

    sync_sdk = openai.OpenAI(base_url=f"{recorder.url}/v1", api_key="k", max_retries=0)
    async_sdk = openai.AsyncOpenAI(base_url=f"{recorder.url}/v1", api_key="k", max_retries=0)
    over_sync = OpenAIClient("m", sync_sdk, api="chat")
    over_async = OpenAIClient("m", async_sdk, api="chat")
    recorder.reply(openai_completion("over the sync client, in a thread"))
    recorder.stream(openai_events(openai_completion("streamed in threads")), pause=0.02)
    recorder.reply(openai_completion("over the async client"))

    async def main() -> None:
        at = AsyncTract(fresh())
        assert (await at.generate(over_sync)).content["text"] == "over the sync client, in a thread"
        stream = await at.generate(over_sync, stream=True)

        async def consume() -> int:
            return len([d async for d in stream])

        gap, took, count = await longest_gap(consume())
        assert count >= 2
        assert gap < took / 2, (gap, took)  # read in threads: the loop kept turning
        assert stream.commit is not None
        assert stream.commit.content["text"] == "streamed in threads"
        assert (await at.generate(over_async)).content["text"] == "over the async client"
        await at.close()

    asyncio.run(main())
    assert [r.headers["x-stainless-async"] for r in recorder.requests][:2] == ["false", "false"]
    assert recorder.requests[2].headers["x-stainless-async"] != "false"
    t = fresh()
    with pytest.raises(InvalidInput, match="wraps an async SDK client"):
        t.generate(over_async)
    with pytest.raises(InvalidInput, match="wraps an async SDK client"):
        t.generate(over_async, stream=True)
    assert len(recorder.requests) == 3  # nothing refused reached the server
    sync_sdk.close()


def test_spawn_and_collapse_as_coroutines(tmp_path: Path) -> None:
    async def main() -> None:
        at = await AsyncTract.open(str(tmp_path / "s"), clock=ticking_clock())
        await at.user("plan the trip")
        child = await at.spawn("hotels", inherit="none")
        assert isinstance(child, AsyncTract)
        assert await child.current_branch() == "main.spawn/hotels"
        assert (await child.parent()).branch == "main"
        await child.user("three hotels?")
        info = await at.collapse(child, content="A, B and C")
        assert info.content["text"] == "A, B and C"
        await child.close()
        (listed,) = await at.children()
        assert (listed.purpose, listed.state) == ("hotels", "collapsed")
        assert await at.current_branch() == "main"
        await at.close()

    asyncio.run(main())
