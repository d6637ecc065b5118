"""The viewer's HTTP side in process (Starlette's test client): pages, errors, headers, sign-in, feed."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tractkv import toolkit
from tractkv.store import LmdbStore
from tractkv.sync.auth import TokenTable
from tractkv.view.app import COOKIE, QUEUE_EVENTS, ChangeFeed, _changes, _put_latest, create_app
from tractkv.view.inspector import Inspector

from .conftest import READER
from .session import HOSTILE

MAIN = "refs/heads/main"
WRITER = "writer-token-0123456789abcdef"


@pytest.fixture
def client(demo: tuple[Path, dict[str, str]]) -> Iterator[TestClient]:
    with LmdbStore(demo[0]) as st:
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            yield c


@pytest.fixture
def locked(demo: tuple[Path, dict[str, str]]) -> Iterator[TestClient]:
    tokens = TokenTable({READER: ["read"], WRITER: ["write:agents/*"]})
    with LmdbStore(demo[0]) as st:
        app, _ = create_app(st, tokens=tokens)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            yield c


def test_every_page_renders_with_strict_headers(
    client: TestClient, demo: tuple[Path, dict[str, str]]
) -> None:
    _, ids = demo
    paths = [
        "/ui/",
        f"/ui/log?ref={MAIN}",
        "/ui/log",  # defaults to HEAD's branch
        f"/ui/log?ref={MAIN}&start=3&limit=2",
        f"/ui/commit/{ids['merge']}?ref={MAIN}",
        f"/ui/commit/{ids['compress'][:8]}?ref={MAIN}&fmt=anthropic",
        f"/ui/usage?ref={MAIN}",
        f"/ui/usage?ref={MAIN}&tool=lookup&status=error",
        "/ui/tools",
        "/ui/tool?name=search",
        "/ui/tool?name=search&a=2&b=1",
        "/ui/diff",
        f"/ui/diff?a={ids['system']}&b=main",
        f"/ui/diff?a=main~2&b=explore&ref={MAIN}",
    ]
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, (path, response.text)
        assert response.headers["content-type"] == "text/html; charset=utf-8"
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.text.count("<script") == 1, path  # only the viewer's own file
    assert client.get("/", follow_redirects=False).headers["location"] == "/ui/"
    assert client.get("/v1/refs").status_code == 404  # `view` serves no sync API
    js = client.get("/ui/static/app.js")
    assert js.status_code == 200
    assert js.headers["content-type"].startswith("text/javascript")
    assert client.get("/ui/static/../app.py").status_code == 404


def test_the_hostile_message_is_text_everywhere(
    client: TestClient, demo: tuple[Path, dict[str, str]]
) -> None:
    _, ids = demo
    for path in (
        f"/ui/commit/{ids['hostile']}?ref={MAIN}",
        f"/ui/log?ref={MAIN}",
        f"/ui/commit/{ids['merge']}",
        f"/ui/diff?a={ids['system']}&b={ids['hostile']}",
    ):
        text = client.get(path).text
        assert "<script>window.pwned" not in text
        assert "<img src=x" not in text
        assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in text, path
    assert HOSTILE.startswith("<script>")


def test_bad_input_gets_a_page_with_the_right_status(client: TestClient) -> None:
    cases = {
        "/ui/log?ref=refs/heads/nope": 404,
        "/ui/log?ref=HEAD": 400,
        "/ui/log?ref=refs/heads/main&start=-1": 400,
        "/ui/log?ref=refs/heads/main&limit=abc": 400,
        "/ui/commit/" + "0" * 64: 404,
        "/ui/commit/xyz": 404,  # any revision: a branch named xyz could exist
        f"/ui/commit/{'0' * 64}?fmt=gemini": 400,
        "/ui/usage?ref=refs/heads/main&status=exploded": 400,
        "/ui/tool?name=nope": 404,
        "/ui/tool?name=search&a=9": 400,
        "/ui/diff?a=nope&b=main": 404,
        "/ui/diff?a=main~99&b=main": 404,
        "/ui/diff?a=main&b=main&ref=HEAD": 400,
        "/ui/static/nope.js": 404,
    }
    for path, status in cases.items():
        response = client.get(path)
        assert response.status_code == status, (path, response.text)
        assert "<h1>" in response.text
        assert "Traceback" not in response.text


def test_fragment_is_the_body_only_and_live_pages_say_where_to_refresh(client: TestClient) -> None:
    full = client.get(f"/ui/log?ref={MAIN}").text
    match = re.search(r'data-live="([^"]+)"', full)
    assert match
    assert match.group(1).replace("&amp;", "&") == f"/ui/log?ref={MAIN}&fragment=1"
    assert f'data-live-ref="{MAIN}"' in full
    assert re.search(r'data-live-version="[0-9a-f]{24}"', full)
    fragment = client.get(match.group(1).replace("&amp;", "&")).text
    assert fragment.startswith("<h1>")
    assert "<html" not in fragment
    assert 'data-live="' not in client.get(f"/ui/log?ref={MAIN}&start=5").text  # older pages stay put


def test_tokens_guard_pages_and_the_feed(locked: TestClient) -> None:
    page = locked.get("/ui/")
    assert page.status_code == 401
    assert 'action="/ui/login"' in page.text
    assert locked.get("/ui/events").status_code == 401
    assert locked.get("/ui/", headers={"Authorization": f"Bearer {WRITER}"}).status_code == 403
    assert locked.get("/ui/", headers={"Authorization": f"Bearer {READER}"}).status_code == 200
    wrong = locked.post("/ui/login", content=b"token=not-a-token", follow_redirects=False)
    assert wrong.status_code == 401
    assert COOKIE not in wrong.cookies
    narrow = locked.post("/ui/login", content=f"token={WRITER}".encode(), follow_redirects=False)
    assert narrow.status_code == 403
    ok = locked.post("/ui/login", content=f"token={READER}".encode(), follow_redirects=False)
    assert ok.status_code == 303
    assert ok.headers["location"] == "/ui/"
    cookie = ok.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    signed_in = locked.get("/ui/")  # the client kept the cookie
    assert signed_in.status_code == 200
    assert 'action="/ui/logout"' in signed_in.text
    assert locked.get("/v1/refs").status_code == 401  # the cookie is for the viewer; sync wants a header
    locked.post("/ui/logout")
    assert locked.get("/ui/").status_code == 401
    assert locked.post("/ui/login", content=b"token=" + b"x" * 5000).status_code == 413


def test_changes_name_moved_branches_and_usage() -> None:
    old = ({"refs/heads/a": "1", "refs/heads/b": "2"}, ((b"u", b"1"),))
    assert _changes(old, old) == {}
    new = ({"refs/heads/a": "3", "refs/heads/c": "4"}, ())
    assert _changes(old, new) == {
        "refs": {"refs/heads/a": "3", "refs/heads/b": None, "refs/heads/c": "4"},
        "usage": True,
    }


def test_a_full_listener_queue_becomes_one_resync() -> None:
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=QUEUE_EVENTS)
    for i in range(QUEUE_EVENTS):
        _put_latest(queue, {"refs": {"r": str(i)}})
    _put_latest(queue, {"usage": True})
    assert queue.qsize() == 1
    assert queue.get_nowait() == {"resync": True}
    for _ in range(QUEUE_EVENTS):
        _put_latest(queue, {"usage": True})
    _put_latest(queue, None)  # closing always gets through
    assert queue.qsize() == 1
    assert queue.get_nowait() is None


def test_feed_reports_a_moved_ref_then_ends_on_close(demo: tuple[Path, dict[str, str]]) -> None:
    async def scenario(st: LmdbStore) -> None:
        feed = ChangeFeed(Inspector(st), interval=0.01)
        queue = await feed.subscribe()  # returns once the feed has its baseline
        tip = st.get_ref(MAIN)  # a stored commit: a ref move to a missing one is refused (MissingRefTarget)
        assert tip is not None
        st.set_ref("refs/heads/spin", tip)
        change = await asyncio.wait_for(queue.get(), timeout=10)
        assert change == {"refs": {"refs/heads/spin": tip}}
        feed.close()
        assert await asyncio.wait_for(queue.get(), timeout=10) is None
        late = await feed.subscribe()  # a stream opened after close ends at once
        assert late.get_nowait() is None

    with LmdbStore(demo[0]) as st:
        asyncio.run(scenario(st))
        st.set_ref("refs/heads/spin", None)


def test_long_contexts_page_and_the_request_json_is_exact(tmp_path: Path) -> None:
    from tractkv import Tract

    path = tmp_path / "long"
    with Tract.open(str(path), durable=False) as t, t.batch():
        t.system("Long session.")
        for i in range(449):
            t.user(f"message number {i}")
    with Tract.open(str(path)) as t:
        tip = t.head
        params = {"openai": t.compile().to_openai_params(), "anthropic": t.compile().to_anthropic_params()}
    with LmdbStore(path) as st:
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            last = c.get(f"/ui/commit/{tip}").text
            assert last.count('<article class="message') == 200
            assert "message number 448" in last
            assert "message number 248</pre>" not in last
            assert "messages 251 to 450 of 450" in last
            assert "raw-params" not in last  # too long to inline: linked as JSON instead
            first = c.get(f"/ui/commit/{tip}?from=0").text
            assert "Long session." in first
            assert "message number 198</pre>" in first
            assert "message number 199</pre>" not in first
            for fmt, expected in params.items():
                response = c.get(f"/ui/commit/{tip}/request.json?fmt={fmt}")
                assert response.status_code == 200
                assert response.json() == expected
            assert c.get(f"/ui/commit/{tip}/request.json?fmt=x").status_code == 400


def test_a_change_before_the_stream_opens_is_not_lost(demo: tuple[Path, dict[str, str]]) -> None:
    async def scenario(st: LmdbStore) -> None:
        feed = ChangeFeed(Inspector(st), interval=60)  # no poll during the test: only `since` can tell
        rendered = await asyncio.to_thread(feed.version)
        current = await feed.subscribe(since=rendered)
        assert current.empty()  # nothing changed since the page was rendered
        st.set_ref(
            "refs/heads/spin", st.get_ref(MAIN)
        )  # lands after rendering, before the next page subscribes
        stale = await feed.subscribe(since=rendered)
        assert stale.get_nowait() == {"resync": True}
        feed.close()

    with LmdbStore(demo[0]) as st:
        asyncio.run(scenario(st))
        st.set_ref("refs/heads/spin", None)


def test_graph_pages_link_to_their_neighbours(client: TestClient) -> None:
    middle = client.get(f"/ui/log?ref={MAIN}&start=3&limit=2").text
    assert middle.count("data-commit=") == 2
    assert "commits 4 to 5" in middle
    assert 'href="/ui/log?start=1&amp;limit=2&amp;ref=refs%2Fheads%2Fmain" rel="prev"' in middle
    assert 'href="/ui/log?start=5&amp;limit=2&amp;ref=refs%2Fheads%2Fmain" rel="next"' in middle
    beyond = client.get(f"/ui/log?ref={MAIN}&start=500&limit=2").text
    assert "no commits from 501 on" in beyond
    assert 'rel="next"' not in beyond
    whole = client.get(f"/ui/log?ref={MAIN}").text
    assert 'class="pager"' not in whole  # one page: no pager at all


def test_a_failed_execution_shows_the_command_that_reruns_it(tmp_path: Path) -> None:
    from tractkv import Tract
    from tractkv.llm import ScriptedLLM
    from tractkv.toolkit import ToolContext, ToolExecutor, tool

    from .session import call

    @tool
    def flaky(*, context: ToolContext) -> str:
        """Fails once."""
        raise ConnectionError("timed out")

    path = str(tmp_path / "store")
    with Tract.open(path) as t:
        t.user("go")
        toolkit.run(
            t,
            ScriptedLLM([call("c1", "flaky", {}), "it failed"]),
            ToolExecutor(t, profile=None, tools=[flaky]),
        )
        (failed,) = t.tool_usages()
    with LmdbStore(path) as st:
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            page = c.get(f"/ui/usage?ref={MAIN}").text
    # the viewer writes nothing: it shows the command that re-runs the failed execution
    assert f'<code class="rerun-command">tractkv usage rerun {failed.id}</code>' in page


def test_pages_link_commits_calls_executions_and_diffs(
    client: TestClient, demo: tuple[Path, dict[str, str]]
) -> None:
    from tractkv import Tract

    path, ids = demo
    with Tract.open(str(path)) as t:
        (asking,) = t.find_tool_calls("research")
        (research,) = t.tool_usages(name="research")
    branches = client.get("/ui/").text
    assert re.search(r'<tr data-ref="refs/heads/main" class="current" aria-current="true">', branches)
    assert branches.count("badge head") == 1
    graph = client.get(f"/ui/log?ref={MAIN}").text
    assert "HEAD → main</span>" in graph
    assert re.search(r'<span class="badge tip kind-local" title="refs/heads/explore">explore</span>', graph)
    # the commit page: the call with indented arguments, linked to its execution on the usage page
    page = client.get(f"/ui/commit/{asking.commit_id}?ref={MAIN}").text
    assert 'id="call-call-1"' in page
    assert '<pre class="json arguments">{\n  &quot;topic&quot;: &quot;LMDB&quot;\n}</pre>' in page
    card = re.search(
        rf'<article class="message[^"]*" data-commit="{asking.commit_id}">.*?</article>', page, re.DOTALL
    )
    assert card  # the call in the compiled context: decoded and indented, not OpenAI's JSON string
    assert '<pre class="json arguments">{\n  &quot;topic&quot;: &quot;LMDB&quot;\n}</pre>' in card.group(0)
    assert "\\&quot;" not in card.group(0)
    usage_link = f"/ui/usage?ref=refs%2Fheads%2Fmain&amp;commit={asking.commit_id}#u-{research.id}"
    assert f'href="{usage_link}"' in page
    parent = asking.parent_ids[0]
    assert f'href="/ui/diff?a={parent}&amp;b={asking.commit_id}&amp;ref=refs%2Fheads%2Fmain"' in page
    # the usage page: each execution links back to the call that started it
    usage = client.get(f"/ui/usage?ref={MAIN}").text
    back = f"/ui/commit/{asking.commit_id}?ref=refs%2Fheads%2Fmain#call-call-1"
    assert f'href="{back}"' in usage
    # the tool page: where each version was in force
    tool = client.get("/ui/tool?name=search").text
    assert tool.count('<tr data-version="2"') == 2
    assert f'href="/ui/commit/{ids["merge"]}?ref=refs%2Fheads%2Fmain"' in tool
    # the diff: the form keeps what was asked; the edit shows as a modified message
    diff = client.get(f"/ui/diff?a={ids['question']}&b={ids['edit']}").text
    assert f'value="{ids["question"]}"' in diff
    assert 'data-change="modified"' in diff
    assert "+And what about canonical CBOR?" in diff


def test_a_long_diff_shows_its_first_changes_and_says_so(
    client: TestClient, demo: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ids = demo
    whole = client.get(f"/ui/diff?a={ids['system']}&b=explore").text
    total = whole.count('class="message diff-entry')
    assert total > 3
    assert "more-changes" not in whole
    monkeypatch.setattr("tractkv.view.pages.DIFF_SHOWN", 3)
    cut = client.get(f"/ui/diff?a={ids['system']}&b=explore").text
    assert cut.count('class="message diff-entry') == 3
    assert f"The first 3 of {total} changes" in cut


def test_the_branches_page_marks_a_detached_head(start_hub: Any, demo: tuple[Path, dict[str, str]]) -> None:
    import httpx

    from tractkv import Tract

    path, _ = demo
    viewer = start_hub(store=path, command="view")
    with httpx.Client(base_url=viewer.url, timeout=30) as c:
        on_branch = c.get("/ui/")
        assert on_branch.status_code == 200
        assert "detached" not in on_branch.text
        assert 'aria-current="true"' in on_branch.text  # the current branch is marked
    with LmdbStore(str(path), durable=False) as st:
        tip = st.get_ref("refs/heads/main")
    assert tip is not None
    with Tract.open(str(path), durable=False) as t:
        t.checkout(tip + "~1")
        at = t.head
    assert at is not None
    viewer = start_hub(store=path, command="view")
    with httpx.Client(base_url=viewer.url, timeout=30) as c:
        page = c.get("/ui/")
        assert page.status_code == 200
        text = re.sub(r"<[^>]+>", "", page.text)
        assert f"HEAD detached at {at[:12]}" in text
        assert f'href="/ui/commit/{at}"' in page.text
        assert 'aria-current="true"' not in page.text  # no branch is current


def test_the_diff_page_says_no_tools_when_neither_side_has_any(
    start_hub: Any, demo: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    import httpx

    from tractkv import Tract

    plain = tmp_path / "plain"
    with Tract.open(str(plain), durable=False) as t:
        t.system("You are terse.")
        t.user("hello")
    for path, heading in ((plain, "Tools (no tools)"), (demo[0], "Tools (no change; 3 unchanged)")):
        viewer = start_hub(store=path, command="view")
        with httpx.Client(base_url=viewer.url, timeout=30) as c:
            page = c.get("/ui/diff", params={"a": "main~1", "b": "main"})
        assert page.status_code == 200, page.text
        text = re.sub(r"<[^>]+>", "", page.text)
        assert heading in text, text
        assert "0 unchanged" not in text
