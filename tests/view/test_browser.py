"""End to end in headless Chromium (Debian's chromium + chromium-driver, driven by Selenium): the viewer
served by a real `tractkv view` / `tractkv serve` process on 127.0.0.1.

Screenshots land in ``$TRACTKV_ARTIFACTS/screenshots`` (default ``test-artifacts/screenshots``).
`tools/install-browser.sh` installs the browser; these tests fail (never skip) without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tractkv import Tract, toolkit
from tractkv.llm import ScriptedLLM
from tractkv.toolkit import ToolContext, ToolExecutor, tool

from .conftest import READER
from .session import HOSTILE, call

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("TRACTKV_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TRACTKV_CHROMEDRIVER", "/usr/bin/chromedriver")
ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("TRACTKV_ARTIFACTS", ROOT / "test-artifacts")) / "screenshots"
WAIT = 15  # seconds any one expected change in the page may take
MAIN = "refs/heads/main"
# Flags from the machine notes: no background networking (this machine refuses outside connections).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1000",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    for binary in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(binary) is None:
            pytest.fail(f"{binary} is missing: run tools/install-browser.sh (CI does)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(WAIT)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: WebDriver, name: str) -> None:
    assert driver.save_screenshot(str(SHOTS / f"{name}.png"))


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    """Poll ``condition`` until it holds (at most WAIT s). Errors from elements of a page being replaced
    (stale or detached nodes during a navigation or a live refresh) count as "not yet"."""
    wait = WebDriverWait(driver, WAIT, poll_frequency=0.1, ignored_exceptions=(WebDriverException,))
    return wait.until(condition, message=what)


def css(driver: WebDriver | Any, selector: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, selector)


def test_click_through_branch_commit_context_and_usage_tree(
    browser: WebDriver, demo: tuple[Path, dict[str, str]], start_hub: Callable[..., Any]
) -> None:
    path, ids = demo
    with Tract.open(str(path)) as t:
        expected = t.compile(at=ids["answer"])
        usages = {u.tool_name: u for u in t.tool_usages()}
    hub = start_hub(store=path, command="view")

    browser.get(f"{hub.url}/ui/")
    assert css(browser, "h1").text == "Branches"
    rows = {r.get_attribute("data-ref"): r for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-ref]")}
    assert set(rows) == {"refs/heads/main", "refs/heads/explore"}
    shot(browser, "1-branches")
    css(rows[MAIN], "a.branch").click()

    wait_for(browser, lambda d: "History of" in css(d, "h1").text, "the graph page")
    commits = [
        r.get_attribute("data-commit") for r in browser.find_elements(By.CSS_SELECTOR, "tr.commit-row")
    ]
    assert ids["merge"] in commits
    assert ids["edit"] in commits
    assert ids["compress"] == commits[0]
    merge_row = css(browser, f'tr[data-commit="{ids["merge"]}"]')
    assert len(merge_row.find_elements(By.CSS_SELECTOR, "svg.lanes line")) >= 3  # in, and out to two parents
    shot(browser, "2-graph")
    css(browser, f'tr[data-commit="{ids["answer"]}"] a.preview').click()

    wait_for(browser, lambda d: ids["answer"] in css(d, "dl.facts").text, "the commit page")
    cards = browser.find_elements(By.CSS_SELECTOR, ".messages article.message")
    assert len(cards) == len(expected.to_openai())
    assert (
        json.loads(css(browser, "pre.raw-params").get_attribute("textContent")) == expected.to_openai_params()
    )
    shot(browser, "3-commit-openai")
    css(browser, 'a.tab[data-fmt="anthropic"]').click()
    wait_for(
        browser, lambda d: "active" in css(d, 'a.tab[data-fmt="anthropic"]').get_attribute("class"), "tab"
    )
    raw = json.loads(css(browser, "pre.raw-params").get_attribute("textContent"))
    assert raw == expected.to_anthropic_params()
    assert css(browser, ".messages article.message .role").text.lower() == "system"
    shot(browser, "4-commit-anthropic")

    css(browser, "header nav").find_element(By.LINK_TEXT, "Tool usage").click()
    wait_for(browser, lambda d: "Tool usage on" in css(d, "h1").text, "the usage page")
    stats = {
        r.get_attribute("data-tool"): r.text for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-tool]")
    }
    assert set(stats) == {"research", "search", "lookup"}
    research = css(browser, f"details#u-{usages['research'].id}")
    lookup = css(browser, f"details#u-{usages['lookup'].id}")
    assert research.get_attribute("open") is None
    assert not lookup.is_displayed()
    assert "1 failed inside" in css(research, "summary").text
    css(research, "summary").click()
    wait_for(browser, lambda d: lookup.is_displayed(), "the nested group to open")
    assert "status-error" in lookup.get_attribute("class")
    assert lookup.get_attribute("open") == "true"  # errors start expanded
    assert "no entry for LMDB" in css(lookup, "pre.error-text").text
    nested = research.find_elements(By.CSS_SELECTOR, ":scope > .children > details.usage")
    assert [css(n, ".tool-name").text for n in nested] == ["search", "search", "lookup"]
    shot(browser, "5-usage-tree")

    # filter by status: the tree around the failure stays, only the failure is marked as a match
    browser.get(f"{hub.url}/ui/usage?ref={MAIN}&status=error")
    matches = browser.find_elements(By.CSS_SELECTOR, "details.usage.match")
    assert [css(m, ".tool-name").text for m in matches] == ["lookup"]

    browser.get(f"{hub.url}/ui/tool?name=search")
    assert "newest first" in css(browser, "pre.diff .diff-add").text
    shot(browser, "6-tool-diff")


def test_an_injected_script_message_is_shown_as_text(
    browser: WebDriver, demo: tuple[Path, dict[str, str]], start_hub: Callable[..., Any]
) -> None:
    path, ids = demo
    hub = start_hub(store=path, command="view")
    for page in (f"/ui/commit/{ids['hostile']}?ref={MAIN}", f"/ui/log?ref={MAIN}"):
        browser.get(hub.url + page)
        assert HOSTILE[:30] in css(browser, "main").text
        assert browser.execute_script("return window.pwned") is None
        assert browser.find_elements(By.CSS_SELECTOR, "main img, main script") == []
    browser.get(f"{hub.url}/ui/commit/{ids['hostile']}?ref={MAIN}")
    texts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "article.message pre.text")]
    assert HOSTILE in texts
    shot(browser, "7-hostile-message")


gate = threading.Event()


@tool
def slow_fetch(url: str, *, context: ToolContext) -> str:
    """Fetch a page (waits until the test lets it finish)."""
    assert gate.wait(60), "the test never released the tool"
    return f"fetched {url}"


def test_live_updates_arrive_without_a_reload(
    browser: WebDriver, tmp_path: Path, start_hub: Callable[..., Any]
) -> None:
    path = tmp_path / "live"
    with Tract.open(str(path), durable=False) as t:
        t.system("Live session.")
    hub = start_hub(store=path, command="view")

    browser.get(f"{hub.url}/ui/log?ref={MAIN}")
    wait_for(browser, lambda d: css(d, "#live").text.startswith("live"), "the event stream to open")
    browser.execute_script("window.notReloaded = true")
    with Tract.open(str(path), durable=False) as t:
        t.user("a message written while the page was open")
    wait_for(browser, lambda d: "written while the page was open" in css(d, "main").text, "the new commit")
    assert browser.execute_script("return window.notReloaded") is True
    assert browser.execute_script("return window.tractkvLive.updates") >= 1
    # the badge tells the time of the update as the pages tell times: UTC, 24-hour
    assert re.fullmatch(r"live · updated \d\d:\d\d:\d\d UTC", css(browser, "#live").text)
    shot(browser, "8-live-commit")

    # a tool starts and finishes in another thread (an agent): the usage page shows both without a reload
    browser.get(f"{hub.url}/ui/usage?ref={MAIN}")
    wait_for(browser, lambda d: css(d, "#live").text.startswith("live"), "the event stream to open")
    browser.execute_script("window.notReloaded = true")
    gate.clear()
    failures: list[BaseException] = []

    def agent() -> None:
        try:
            with Tract.open(str(path), durable=False) as t:
                ex = ToolExecutor(t, profile=None, tools=[slow_fetch])
                llm = ScriptedLLM([call("live-1", "slow_fetch", {"url": "http://127.0.0.1/x"}), "done"])
                toolkit.run(t, llm, ex)
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    runner = threading.Thread(target=agent)
    runner.start()
    try:
        wait_for(
            browser, lambda d: d.find_elements(By.CSS_SELECTOR, "details.usage.status-pending"), "tool start"
        )
        shot(browser, "9-live-tool-running")
    finally:
        gate.set()
        runner.join(60)
    assert not runner.is_alive()
    assert not failures, failures
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "details.usage.status-success"), "tool end")
    assert browser.find_elements(By.CSS_SELECTOR, "details.usage.status-pending") == []
    assert browser.execute_script("return window.notReloaded") is True
    shot(browser, "10-live-tool-done")


def test_sign_in_with_a_read_token_on_a_hub_with_tokens(
    browser: WebDriver, demo: tuple[Path, dict[str, str]], start_hub: Callable[..., Any], tokens_file: str
) -> None:
    path, _ = demo
    hub = start_hub("--tokens", tokens_file, store=path)
    browser.delete_all_cookies()
    browser.get(f"{hub.url}/ui/")
    assert css(browser, "h1").text == "Sign in"
    css(browser, "input[name=token]").send_keys(READER)
    css(browser, "form button").click()
    wait_for(browser, lambda d: css(d, "h1").text == "Branches", "the branches page after sign-in")
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr[data-ref]")) == 2
    shot(browser, "11-signed-in")
    css(browser, "header nav form button").click()
    wait_for(browser, lambda d: css(d, "h1").text == "Sign in", "the sign-in page after signing out")
    browser.get(f"{hub.url}/ui/")
    assert css(browser, "h1").text == "Sign in"  # the cookie is gone


def _gradient_png(width: int, height: int) -> bytes:
    """A real, visibly coloured PNG (a red-blue gradient), built with zlib only."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(
        b"\x00" + b"".join(bytes((255 * x // width, 80, 255 * y // height)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_an_image_part_is_shown_as_a_thumbnail(
    browser: WebDriver, tmp_path: Path, start_hub: Callable[..., Any]
) -> None:
    """A user message with an image and a PDF: the image is a thumbnail loaded from /ui/media/<id> under the
    CSP (``img-src 'self'``), the document a marker, and the page's request JSON carries the exact bytes."""
    png = _gradient_png(320, 200)
    pdf = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\ntrailer << >>\n%%EOF\n"
    path = tmp_path / "store"
    with Tract.open(str(path)) as t:
        t.system("You describe pictures.")
        info = t.user(
            [
                "What is in this picture, and what does the attached page say?",
                {"type": "image", "data": png, "media_type": "image/png"},
                {"type": "document", "data": pdf, "media_type": "application/pdf", "title": "notes.pdf"},
            ]
        )
        t.assistant("A gradient from red to blue; the page is blank.")
        expected = t.compile(at=info.commit_id).to_openai_params()
    hub = start_hub(store=path, command="view")
    browser.get(f"{hub.url}/ui/commit/{info.commit_id}?ref={MAIN}")
    image = wait_for(browser, lambda d: css(d, "article.message img"), "the thumbnail")
    assert "/ui/media/" in (image.get_attribute("src") or "")  # linked, not inlined
    assert wait_for(
        browser, lambda d: d.execute_script("return arguments[0].naturalWidth", image) == 320, "load"
    )
    assert 0 < image.size["width"] <= 320
    assert "notes.pdf" in css(browser, "main").text
    shown = css(browser, "pre.raw-params").get_attribute("textContent")
    assert len(shown) < len(json.dumps(expected)) // 2  # the page elides long base64 ...
    browser.get(f"{hub.url}/ui/commit/{info.commit_id}/request.json?ref={MAIN}&fmt=openai")
    assert json.loads(css(browser, "body").text) == expected  # ... the request it links to is exact
    browser.back()
    image = wait_for(browser, lambda d: css(d, "article.message img"), "the thumbnail again")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", image)
    shot(browser, "12-image-thumbnail")


def test_head_tips_calls_executions_tool_ranges_and_a_diff(
    browser: WebDriver, demo: tuple[Path, dict[str, str]], start_hub: Callable[..., Any]
) -> None:
    """Issue 17, item 13: the current branch, branch tips in the graph, a commit's tool calls linked to their
    executions and back, where each version of a tool was in force, and the diff of two commits."""
    path, ids = demo
    with Tract.open(str(path)) as t:
        (asking,) = t.find_tool_calls("research")
        (research,) = t.tool_usages(name="research")
        expected = t.diff(ids["annotate"], "explore")
    hub = start_hub(store=path, command="view")

    browser.get(f"{hub.url}/ui/")
    current = browser.find_elements(By.CSS_SELECTOR, "tr.current")
    assert [r.get_attribute("data-ref") for r in current] == [MAIN]
    assert css(current[0], ".badge.head").text == "HEAD"

    browser.get(f"{hub.url}/ui/log?ref={MAIN}")
    tips = {
        r.get_attribute("data-commit"): [b.text for b in r.find_elements(By.CSS_SELECTOR, ".badge.tip")]
        for r in browser.find_elements(By.CSS_SELECTOR, "tr.commit-row")
    }
    assert tips[ids["compress"]] == ["HEAD → main"]
    explore_tip = next(c for c, labels in tips.items() if labels == ["explore"])
    assert sum(bool(labels) for labels in tips.values()) == 2

    # the assistant message's call, its arguments as indented JSON, the execution it started
    browser.get(f"{hub.url}/ui/commit/{asking.commit_id}?ref={MAIN}")
    card = css(browser, "article.call#call-call-1")
    assert css(card, ".tool-name").text == "research"
    arguments = css(card, "pre.arguments").text
    assert json.loads(arguments) == {"topic": "LMDB"}
    assert '\n  "topic": "LMDB"\n' in arguments  # indented, not an escaped string
    context_args = css(browser, f'article.message[data-commit="{asking.commit_id}"] .context-call pre')
    assert json.loads(context_args.text) == {"topic": "LMDB"}
    assert '\\"' not in context_args.text
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", card)
    shot(browser, "13-commit-tool-calls")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", context_args)
    shot(browser, "14-context-tool-call-openai")
    css(browser, 'a.tab[data-fmt="anthropic"]').click()
    wait_for(browser, lambda d: "fmt=anthropic" in d.current_url, "the Anthropic tab")
    tool_use = css(browser, ".messages article.role-assistant .context-call")
    assert css(tool_use, ".tool-name").text == "research"
    assert json.loads(css(tool_use, "pre").text) == {"topic": "LMDB"}
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", tool_use)
    shot(browser, "15-context-tool-call-anthropic")
    card = css(browser, "article.call#call-call-1")
    link = css(card, "ul.executions a")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()

    wait_for(browser, lambda d: "Tool usage on" in css(d, "h1").text, "the usage page")
    execution = css(browser, f"details#u-{research.id}")
    wait_for(browser, lambda d: execution.get_attribute("open") == "true", "the linked execution to open")
    started = css(execution, "a.started-by")
    assert started.get_attribute("href").endswith(
        f"/ui/commit/{asking.commit_id}?ref=refs%2Fheads%2Fmain#call-call-1"
    )
    shot(browser, "16-usage-linked-execution")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", started)
    started.click()
    wait_for(browser, lambda d: d.current_url.endswith("#call-call-1"), "back to the call")
    assert css(browser, "article.call#call-call-1").is_displayed()

    # where each version of the search tool was in force
    browser.get(f"{hub.url}/ui/tool?name=search")
    ranges = [
        (r.get_attribute("data-version"), r.get_attribute("data-ref"), r.text)
        for r in browser.find_elements(By.CSS_SELECTOR, "table.in-force tbody tr")
    ]
    assert [(v, ref) for v, ref, _ in ranges] == [
        ("1", "refs/heads/explore"),
        ("1", MAIN),
        ("2", "refs/heads/explore"),
        ("2", MAIN),
    ]
    assert ranges[3][2].endswith("tip 2")  # v2 on main: from the merge to the tip
    assert ids["merge"][:12] in ranges[3][2]
    assert explore_tip[:12] in ranges[2][2]
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", css(browser, "table.in-force"))
    shot(browser, "17-tool-in-force")

    # the diff of a commit with its parent, from the commit page
    browser.get(f"{hub.url}/ui/commit/{ids['edit']}?ref={MAIN}")
    css(browser, "a.diff-link").click()
    wait_for(browser, lambda d: css(d, "h1").text == "Compare two commits", "the diff page")
    (entry,) = browser.find_elements(By.CSS_SELECTOR, "article.diff-entry")
    assert entry.get_attribute("data-change") == "modified"
    assert "+And what about canonical CBOR?" in css(entry, "pre.diff").text
    shot(browser, "18-diff-with-parent")

    # any two revisions, picked in the form: messages and tools (search changed on explore)
    form_a, form_b = css(browser, "input[name=a]"), css(browser, "input[name=b]")
    form_a.clear()
    form_a.send_keys(ids["annotate"][:10])
    form_b.clear()
    form_b.send_keys("explore")
    css(browser, "form.diff-form button").click()
    wait_for(browser, lambda d: "explore" in d.current_url, "the chosen diff")
    shown = [
        (e.get_attribute("data-change"), e.get_attribute("data-commit"))
        for e in browser.find_elements(By.CSS_SELECTOR, "article.diff-entry")
    ]
    assert shown == [(e.change, e.commit_id) for e in expected.entries]
    (tool,) = browser.find_elements(By.CSS_SELECTOR, "section.tool-change")
    assert (tool.get_attribute("data-tool"), tool.get_attribute("data-change")) == ("search", "modified")
    assert "newest first" in css(tool, ".diff-add").text
    shot(browser, "19-diff-two-revisions")


def test_the_branches_page_shows_reported_and_estimated_counts_and_budget_use(
    browser: WebDriver, tmp_path: Path, start_hub: Callable[..., Any]
) -> None:
    """A branch whose newest reply carries the provider's usage shows its reported count (green
    ``reported`` badge) and its budget use; a branch whose context changed before that reply shows the
    estimate; a branch over its budget is marked."""
    path = tmp_path / "store"
    reply = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-x",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Sunny."}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 2400, "completion_tokens": 6, "total_tokens": 2406},
    }
    with Tract.open(str(path)) as t:
        t.system("You answer weather questions briefly.")
        question = t.user("What is the weather in Paris today?").commit_id
        t.record_response(reply)
        t.user("And tomorrow?")
        t.set_budget(10_000, action="trim", threshold=0.8)
        t.branch("edited")
        t.commit(
            {"type": "dialogue", "role": "user", "text": "In Rome?"}, operation="edit", edit_target=question
        )
        t.set_budget(20)
        edited = t.status()
        t.switch("main")
        main = t.status()
    assert (main.count_source, edited.count_source) == ("reported", "estimated")
    hub = start_hub(store=path, command="view")
    browser.get(f"{hub.url}/ui/")
    rows = {r.get_attribute("data-ref"): r for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-ref]")}
    shown = {ref: (css(r, "td.tokens").text, css(r, "[class*=count-]").text) for ref, r in rows.items()}
    assert shown == {
        MAIN: (f"{main.token_count:,}", "reported"),
        "refs/heads/edited": (f"{edited.token_count:,}", "estimated"),
    }
    budget = css(rows[MAIN], "td.budget span")
    assert budget.text == f"{main.token_count:,} / 10,000 ({main.token_count / 10_000:.0%})"
    assert "budget-ok" in budget.get_attribute("class")
    over = css(rows["refs/heads/edited"], "td.budget span")
    assert over.text == f"{edited.token_count:,} / 20 ({edited.token_count / 20:.0%})"
    assert "budget-over" in over.get_attribute("class")
    # each budget's action, and the threshold it runs at when below the whole budget
    assert css(rows[MAIN], "td.budget .budget-action").text == "trim at 80%"
    assert "skips the oldest messages" in css(rows[MAIN], ".budget-action").get_attribute("title")
    assert css(rows["refs/heads/edited"], "td.budget .budget-action").text == "warn"
    assert str(main.estimated_tokens) in css(rows[MAIN], ".count-reported").get_attribute("title")
    shot(browser, "13-branch-counts-and-budgets")


def test_the_spawn_tree_links_parent_children_and_a_collapsed_childs_history(
    browser: WebDriver, tmp_path: Path, start_hub: Callable[..., Any]
) -> None:
    """Spawn / collapse (issue 21): a branch's history page shows its children (open ones link to their
    branch, collapsed ones to their history and the commit that brought them back), a child's page its
    parent."""
    path = tmp_path / "spawned.tkv"
    with Tract.open(str(path), durable=False) as t:
        t.system("You plan trips.")
        t.user("Plan a weekend in Lisbon, with a budget.")
        with t.spawn("price the hotels") as child:
            child.user("Find three hotels under 150 EUR a night.")
            child.assistant("Hotel A 120, Hotel B 135, Hotel C 149.")
            hotels_head = child.head
            back = t.collapse(child, content="Hotels: A 120, B 135, C 149 EUR a night.")
        with t.spawn("find restaurants near the river", inherit="full") as child:
            child.user("Three restaurants by the Tagus?")
    assert hotels_head is not None
    hub = start_hub(store=path, command="view")

    browser.get(f"{hub.url}/ui/log?ref={MAIN}")
    wait_for(browser, lambda d: "History of" in css(d, "h1").text, "the graph page")
    rows = browser.find_elements(By.CSS_SELECTOR, "section.spawn-tree tr.child-row")
    assert [(r.get_attribute("data-state"), css(r, "td.purpose").text) for r in rows] == [
        ("collapsed", "price the hotels"),
        ("open", "find restaurants near the river"),
    ]
    assert css(rows[1], "a.ref").text == "main.spawn/find-restaurants-near-the-river"
    shot(browser, "20-spawn-tree")

    # a collapsed child: the commit that brought it back links its history...
    css(rows[0], f'a[href*="{back.commit_id}"]').click()
    facts = wait_for(browser, lambda d: css(d, "dl.facts"), "the collapse commit")
    assert "Collapsed child" in facts.text
    assert "collapse main.spawn/price-the-hotels: price the hotels" in facts.text
    shot(browser, "21a-collapse-commit")
    # ...its last commit, with the context it ended with
    css(facts, f'a[href*="{hotels_head}"]').click()
    wait_for(browser, lambda d: hotels_head in css(d, "dl.facts").text, "the child's last commit")
    cards = [c.text for c in browser.find_elements(By.CSS_SELECTOR, ".messages article.message")]
    assert "Hotel A 120, Hotel B 135, Hotel C 149." in cards[-1]
    assert len(cards) == 4  # the parent's two messages (a snapshot) and the child's two
    # its branch is gone: a banner says whose child it is and which commit brought it back
    banner = css(browser, "p.child-banner")
    assert banner.get_attribute("data-state") == "collapsed"
    assert banner.text.startswith("Child of main for: price the hotels (snapshot, spawned in ")
    assert css(banner, "a.ref").get_attribute("href").endswith("/ui/log?ref=refs%2Fheads%2Fmain")
    assert banner.text.endswith(f"brought back by {back.commit_id[:12]}")
    shot(browser, "21-collapsed-child-history")

    # an open child: its branch's history says where it was spawned from, and links back
    browser.get(f"{hub.url}/ui/log?ref={MAIN}")
    rows = wait_for(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "section.spawn-tree tr.child-row"), "the children"
    )
    css(rows[1], "a.ref").click()
    wait_for(browser, lambda d: "find-restaurants" in css(d, "h1").text, "the child's history")
    parent = css(browser, "section.spawn-tree p.spawn-parent")
    assert "Spawned from main" in parent.text
    assert "find restaurants near the river" in parent.text
    assert browser.find_elements(By.CSS_SELECTOR, "section.spawn-tree tr.child-row") == []
    shot(browser, "22-spawned-child")
    # an open child's commit: the banner names its parent, and nothing brought it back yet
    css(browser, "tr.commit-row a.preview").click()
    banner = wait_for(browser, lambda d: css(d, "p.child-banner"), "the open child's commit")
    assert banner.get_attribute("data-state") == "spawned"
    assert banner.text.startswith("Child of main for: find restaurants near the river (full, spawned in ")
    assert "brought back" not in banner.text
    shot(browser, "22b-open-child-commit")
    browser.back()
    parent = wait_for(browser, lambda d: css(d, "section.spawn-tree p.spawn-parent"), "the child's history")
    css(parent, "a.ref").click()
    wait_for(browser, lambda d: css(d, "h1").text == "History of main", "back on the parent's history")
