"""The viewer's search page (issue 34 item 3): server-rendered, every value escaped, the match marked; a bad
pattern shows the form with the error; the nav links to it; and in Chromium, typing a query finds hits."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from starlette.testclient import TestClient

from tractkv.engine import search as search_mod
from tractkv.store import LmdbStore
from tractkv.view.app import create_app

from .session import HOSTILE
from .test_browser import browser, shot, wait_for  # noqa: F401  (browser: the module's Chromium fixture)

MAIN = "refs/heads/main"


@pytest.fixture
def client(demo: tuple[Path, dict[str, str]]) -> Iterator[TestClient]:
    search_mod.clear_caches()
    with LmdbStore(demo[0]) as st:
        app, _ = create_app(st, sync=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            yield c


def test_the_form_alone_and_the_nav_link(client: TestClient) -> None:
    page = client.get(f"/ui/search?ref={MAIN}")
    assert page.status_code == 200
    assert 'action="/ui/search"' in page.text
    assert "search-hit" not in page.text
    log = client.get(f"/ui/log?ref={MAIN}").text
    assert f'href="/ui/search?ref={quote(MAIN, safe="")}"' in log


def test_hits_link_their_commits_and_mark_the_match(
    client: TestClient, demo: tuple[Path, dict[str, str]]
) -> None:
    _, ids = demo
    page = client.get(f"/ui/search?ref={MAIN}&q=LMDB&i=1")
    assert page.status_code == 200
    assert "<mark>LMDB</mark>" in page.text
    assert re.search(r'<h2 class="hit-count">\d+ hits?</h2>', page.text)
    hostile = client.get(f"/ui/search?ref={MAIN}&q={quote('<script>')}").text
    assert f'href="/ui/commit/{ids["hostile"]}?ref=' in hostile
    assert "<mark>&lt;script&gt;</mark>window.pwned" in hostile
    assert HOSTILE not in hostile  # never as markup
    assert 'value="&lt;script&gt;"' in hostile  # the query in the form is escaped too
    none = client.get(f"/ui/search?ref={MAIN}&q=no+such+text+anywhere").text
    assert '<h2 class="hit-count">0 hits</h2>' in none


def test_filters_and_scope(client: TestClient) -> None:
    every = client.get(f"/ui/search?ref={MAIN}&q=a&regex=1").text
    users = client.get(f"/ui/search?ref={MAIN}&q=a&regex=1&role=user").text
    assert users.count("search-hit") < every.count("search-hit")
    assert 'selected value="user"' in users or '<option value="user" selected' in users
    in_context = client.get(f"/ui/search?ref={MAIN}&q=a&scope=context").text
    assert "search-hit" in in_context


def test_a_bad_pattern_shows_the_form_and_the_error(client: TestClient) -> None:
    page = client.get(f"/ui/search?ref={MAIN}&q=%28&regex=1")
    assert page.status_code == 200
    assert 'class="error search-error"' in page.text
    assert "invalid regular expression" in page.text
    assert 'action="/ui/search"' in page.text
    typo = client.get("/ui/search?ref=refs/heads/nope&q=x")
    assert typo.status_code == 200  # a branch that is not there: the form, and the error
    assert "search-error" in typo.text
    assert "nope" in typo.text


@pytest.mark.slow
def test_search_in_the_browser(
    browser: WebDriver,  # noqa: F811  (the fixture imported from test_browser)
    demo: tuple[Path, dict[str, str]],
    start_hub: Callable[..., Any],
) -> None:
    path, _ = demo
    hub = start_hub(store=path, command="view")
    for width in (800, 1280):
        browser.set_window_size(width, 900)
        browser.get(f"{hub.url}/ui/log?ref={MAIN}")
        browser.find_element(By.LINK_TEXT, "Search").click()
        box = browser.find_element(By.CSS_SELECTOR, "form.search-form input[name=q]")
        box.send_keys("<script>")
        browser.find_element(By.CSS_SELECTOR, "form.search-form button").click()
        marks = wait_for(
            browser, lambda d: d.find_elements(By.CSS_SELECTOR, "li.search-hit mark"), "search hits"
        )
        assert marks[0].text == "<script>"
        assert browser.execute_script("return window.pwned") is None
        shot(browser, f"search-{width}")
    browser.set_window_size(1280, 1000)
