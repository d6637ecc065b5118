"""Viewer polish (issue 34, item 6) in headless Chromium at 800 and 1280 px, as a user sees it: graph rows keep
their branch badge and as much of their message as fits, cut with an ellipsis; error pages and the Compare
form's error keep the nav bar; the usage page links a re-run; titles say `main`. Screenshots
(``polish-*-800.png`` / ``-1280.png``) land beside test_browser.py's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tractkv import Tract

from .session import build
from .test_browser import browser, css, shot, wait_for  # noqa: F401  (browser: the module's Chromium)
from .test_polish import gradient_png, rerun_store

pytestmark = pytest.mark.slow

WIDTHS = (800, 1280)
LONG = (
    "This is a considerably longer message that goes on and on, to show how the graph page cuts it when "
    "the window is narrow"
)

# Each graph row's content cell, as the user sees it: where the badges and the preview sit in the cell, and
# whether the preview is cut (wider text than box) and how.
ROW_GEOMETRY = """
return Array.from(document.querySelectorAll('tr.commit-row')).map(function (row) {
  var cell = row.querySelector('td.content'), preview = cell.querySelector('a.preview');
  var c = cell.getBoundingClientRect(), p = preview.getBoundingClientRect();
  var style = getComputedStyle(cell), ps = getComputedStyle(preview);
  var inner = c.right - parseFloat(style.paddingRight);
  var badges = Array.from(cell.querySelectorAll('.badge.tip')).map(function (b) {
    var r = b.getBoundingClientRect();
    return {left: r.left, right: r.right, width: r.width, text: b.textContent,
            cut: b.scrollWidth > b.clientWidth, ellipsis: getComputedStyle(b).textOverflow};
  });
  return {commit: row.dataset.commit, inner: inner, left: c.left + parseFloat(style.paddingLeft),
          previewLeft: p.left, previewRight: p.right, previewWidth: p.width,
          cut: preview.scrollWidth > preview.clientWidth, ellipsis: ps.textOverflow,
          overflow: ps.overflowX, text: preview.textContent, badges: badges};
});
"""


@pytest.fixture
def graph_store(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The demo session, then a long-named branch whose tip has a long message, and `main` one commit
    behind it with a short one."""
    path = tmp_path / "graph"
    with Tract.open(str(path), durable=False) as t:
        ids = build(t)
        ids["short"] = t.user("A short one").commit_id
        t.branch("feature-with-a-long-name", switch=True)
        ids["long"] = t.user(LONG).commit_id
    return path, ids


def at_width(driver: WebDriver, width: int) -> None:
    driver.set_window_size(width, 900)
    inner = driver.execute_script("return window.innerWidth")
    driver.set_window_size(width + (width - inner), 900)  # the page itself is `width` px wide
    assert driver.execute_script("return window.innerWidth") == width


def test_graph_rows_show_badges_and_as_much_text_as_fits(
    browser: WebDriver,  # noqa: F811
    graph_store: tuple[Path, dict[str, str]],
    start_hub: Callable[..., Any],
) -> None:
    path, ids = graph_store
    hub = start_hub(store=path, command="view")
    for width in WIDTHS:
        at_width(browser, width)
        browser.get(f"{hub.url}/ui/log?ref=refs/heads/feature-with-a-long-name")
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "tr.commit-row"), "the graph")
        assert browser.title == "History of feature-with-a-long-name · tractkv"
        rows = {r["commit"]: r for r in browser.execute_script(ROW_GEOMETRY)}
        for row in rows.values():
            # nothing is cut by the cell's edge (mid-letter): the preview ends inside the cell ...
            assert row["previewRight"] <= row["inner"] + 0.5, (width, row)
            for badge in row["badges"]:
                assert badge["left"] >= row["left"] - 0.5, row
                assert badge["right"] <= row["previewLeft"] + 0.5, row
                assert not badge["cut"] or badge["ellipsis"] == "ellipsis", row
            # ... and text that does not fit is cut by its own box, with an ellipsis
            assert row["overflow"] == "hidden"
            assert row["ellipsis"] == "ellipsis"
        long, short = rows[ids["long"]], rows[ids["short"]]
        # the tip of a long-named branch: its badge, and beside it as much of the message as fits
        (badge,) = long["badges"]
        assert badge["text"] == "HEAD → feature-with-a-long-name"
        assert badge["width"] >= 60
        assert long["text"].startswith("This is a considerably")
        assert long["cut"]
        assert long["previewRight"] >= long["inner"] - 1  # the text fills the cell up to its edge
        assert long["previewWidth"] >= (100 if width == 800 else 400)
        # a short message beside a short badge is shown whole
        assert [b["text"] for b in short["badges"]] == ["main"]
        assert not short["badges"][0]["cut"]
        assert short["text"] == "A short one"
        assert not short["cut"]
        if width == 1280:
            assert not badge["cut"]  # room for the whole branch name
        shot(browser, f"polish-graph-{width}")


def test_error_pages_the_compare_form_and_titles(
    browser: WebDriver,  # noqa: F811
    demo: tuple[Path, dict[str, str]],
    start_hub: Callable[..., Any],
) -> None:
    path, _ = demo
    hub = start_hub(store=path, command="view")
    for width in WIDTHS:
        at_width(browser, width)
        browser.get(f"{hub.url}/ui/no-such-page")
        assert css(browser, "h1").text == "404"
        nav = css(browser, "header nav")
        assert [a.text for a in nav.find_elements(By.CSS_SELECTOR, "a")] == ["Branches", "Tools", "Compare"]
        shot(browser, f"polish-404-{width}")

        browser.get(f"{hub.url}/ui/diff")
        css(browser, "input[name=a]").send_keys("mian")  # a typo of main
        css(browser, "input[name=b]").send_keys("explore")
        css(browser, "form.diff-form button").click()
        wait_for(browser, lambda d: "mian" in d.current_url, "the refused comparison")
        assert css(browser, "h1").text == "Compare two commits"
        assert css(browser, "p.form-error").text == "unknown revision 'mian': names no commit"
        assert css(browser, "input[name=a]").get_attribute("value") == "mian"
        assert css(browser, "input[name=a]").get_attribute("aria-invalid") == "true"
        assert browser.switch_to.active_element.get_attribute("name") == "a"  # ready to be corrected
        assert css(browser, "input[name=b]").get_attribute("value") == "explore"
        assert css(browser, "header nav").is_displayed()
        shot(browser, f"polish-compare-typo-{width}")
        field = css(browser, "input[name=a]")
        field.clear()
        field.send_keys("main")
        css(browser, "form.diff-form button").click()
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "article.diff-entry"), "the comparison")
        assert browser.find_elements(By.CSS_SELECTOR, "p.form-error") == []

        browser.get(f"{hub.url}/ui/usage")
        nav_ref = css(browser, "header nav span.ref")
        assert nav_ref.text == "main"
        assert browser.title == "Tool usage on main · tractkv"
        assert css(browser, "h1").text == "Tool usage on main"


def test_usage_page_links_a_rerun(
    browser: WebDriver,  # noqa: F811
    tmp_path: Path,
    start_hub: Callable[..., Any],
) -> None:
    usages = rerun_store(tmp_path / "s")
    rerun, failed, again = usages["rerun"], usages["failed"], usages["again"]
    hub = start_hub(store=tmp_path / "s", command="view")
    for width in WIDTHS:
        at_width(browser, width)
        browser.get(f"{hub.url}/ui/usage?ref=refs/heads/main")
        card = css(browser, f"details#u-{rerun.id}")
        assert card.get_attribute("open") == "true"  # errors start expanded
        assert card.find_elements(By.CSS_SELECTOR, ".rerun-command") == []
        link = css(card, "a.rerun-link")
        assert link.text == again.id
        other = css(browser, f"details#u-{failed.id}")
        assert css(other, ".rerun-command").text == f"tractkv usage rerun {failed.id}"
        browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", card)
        shot(browser, f"polish-usage-rerun-{width}")
        link.click()
        wait_for(browser, lambda d: d.current_url.endswith(f"#u-{again.id}"), "the re-run")
        wait_for(
            browser,
            lambda d: css(d, f"details#u-{again.id}").get_attribute("open") == "true",
            "the re-run, open",
        )


def test_image_size_is_its_bytes(
    browser: WebDriver,  # noqa: F811
    tmp_path: Path,
    start_hub: Callable[..., Any],
) -> None:
    png = gradient_png(24)
    with Tract.open(str(tmp_path / "s")) as t:
        info = t.user(
            ["What colours are in this?", {"type": "image", "data": png, "media_type": "image/png"}]
        )
    hub = start_hub(store=tmp_path / "s", command="view")
    for width in WIDTHS:
        at_width(browser, width)
        browser.get(f"{hub.url}/ui/commit/{info.commit_id}")
        caption = wait_for(browser, lambda d: css(d, "article.message figcaption"), "the image")
        assert caption.text == f"image/png {len(png)} B"
        assert caption.get_attribute("title") == f"{len(png):,} bytes"
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", caption)
        shot(browser, f"polish-image-{width}")
