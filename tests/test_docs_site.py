"""The documentation site (mkdocs.yml, docs/): `mkdocs build --strict` succeeds (a broken link, a page left out
of the navigation or a reference that does not resolve fails it), and the built reference covers every public
name, every command and every HTTP route. Screenshots of the built site land in
``$TRACTKV_ARTIFACTS/screenshots/docs-*.png``.
"""

from __future__ import annotations

import functools
import html
import http.server
import importlib
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

import tractkv.integrations
from tractkv.cli import cli

pytestmark = pytest.mark.slow  # one site build (~5 s unloaded) and a browser

ROOT = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("TRACTKV_ARTIFACTS", ROOT / "test-artifacts")) / "screenshots"
CHROMIUM = os.environ.get("TRACTKV_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TRACTKV_CHROMEDRIVER", "/usr/bin/chromedriver")
# the public modules whose every name in __all__ the API reference must show; the integrations are found, not
# listed, so a new one without a page fails
API_MODULES = [
    "tractkv",
    "tractkv.toolkit",
    "tractkv.llm",
    "tractkv.aio",
    "tractkv.integrations",
    *sorted(
        f"tractkv.integrations.{m.name}"
        for m in pkgutil.iter_modules(tractkv.integrations.__path__)
        if not m.name.startswith("_")
    ),
]
_HEADING = re.compile(r"<h([1-6]) id=\"([^\"]+)\"[^>]*>(.*?)</h\1>", re.S)


def build(site: Path, config: Path = ROOT / "mkdocs.yml") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = build(out)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def headings(page: Path) -> dict[str, str]:
    """The page's headings: id -> text (tags and the permalink sign removed)."""
    text = page.read_text(encoding="utf-8")
    found = {}
    for _, anchor, inner in _HEADING.findall(text):
        found[anchor] = html.unescape(re.sub(r"<[^>]+>", "", inner)).replace("¶", "").strip()
    return found


def commands(group: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path under ``group`` (its subgroups' commands too), hidden commands left out."""
    if isinstance(group, click.Group):
        for name, command in group.commands.items():
            if not command.hidden:
                yield (*path, name)
                yield from commands(command, (*path, name))


def test_api_reference_shows_every_public_name(site: Path) -> None:
    anchors = set()
    for page in (site / "api").rglob("index.html"):
        anchors |= set(headings(page))
        # the docstrings' Sphinx roles render as code (tools/griffe_roles.py), not as a stray ":class:"
        role = re.search(r":(?:class|mod|func|meth|attr|exc):", page.read_text(encoding="utf-8"))
        assert role is None, f"{page.relative_to(site)}: {role}"
    missing = {}
    for name in API_MODULES:
        module = importlib.import_module(name)
        absent = [n for n in module.__all__ if f"{name}.{n}" not in anchors]
        if f"{name}" not in anchors or absent:
            missing[name] = absent or ["(the module itself)"]
    assert not missing, f"public names without an entry in the API reference: {missing}"


def test_cli_reference_shows_every_command(site: Path) -> None:
    shown = set(headings(site / "cli" / "index.html").values())
    expected = {" ".join(("tractkv", *path)) for path in commands(cli)}
    assert len(expected) > 40
    assert expected <= shown, f"commands missing from the CLI reference: {sorted(expected - shown)}"
    # no internal default leaks into the page (mkdocs-click's table style printed click 8.3's `Sentinel.UNSET`)
    page_text = (site / "cli" / "index.html").read_text(encoding="utf-8")
    assert "Sentinel." not in page_text
    # the text under a heading is the command's own help: one example, checked word for word
    first_line = cli.commands["cherry-pick"].get_short_help_str(limit=200)
    assert html.escape(first_line, quote=False).split("`")[0] in page_text


def test_http_api_page_lists_every_route_of_openapi_json(site: Path) -> None:
    spec = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))
    shown = set(headings(site / "http-api" / "index.html").values())
    expected = {
        f"{method.upper()} {path}"
        for path, item in spec["paths"].items()
        for method in item
        if method in {"get", "put", "post", "delete", "patch", "head", "options"}
    }
    assert expected
    assert expected <= shown, f"routes missing from the HTTP API page: {sorted(expected - shown)}"
    assert (site / "openapi.json").read_bytes() == (ROOT / "docs" / "openapi.json").read_bytes()


def test_changelog_and_readme_pages_are_the_repository_files(site: Path) -> None:
    changelog = headings(site / "changelog" / "index.html")
    first_release_heading = next(
        line[3:].strip()
        for line in (ROOT / "CHANGELOG.md").read_text().splitlines()
        if line.startswith("## ")
    )
    assert first_release_heading in changelog.values()
    guide = set(headings(site / "guide" / "index.html").values())
    sections = {
        line[3:].strip() for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("## ")
    }
    assert sections <= guide
    # the links written for the repository (../CHANGELOG.md, docs/versioning.md) lead to the site's pages
    assert 'href="../changelog/"' in (site / "versioning" / "index.html").read_text(encoding="utf-8")
    assert 'href="../versioning/"' in (site / "changelog" / "index.html").read_text(encoding="utf-8")


def test_pages_load_nothing_from_outside(site: Path) -> None:
    """Offline: no web fonts, scripts, styles or images from another host (links to read are fine)."""
    loads = re.compile(r"<(?:script|img|iframe)[^>]*\bsrc=\"(?:https?:)?//|<link[^>]*\bhref=\"(?:https?:)?//")
    outside = [str(p.relative_to(site)) for p in site.rglob("*.html") if loads.search(p.read_text("utf-8"))]
    assert not outside, outside
    css = "".join(p.read_text("utf-8") for p in (site / "assets").rglob("*.css"))
    assert "fonts.googleapis" not in css
    assert "fonts.gstatic" not in css


def test_a_missing_reference_fails_the_build(tmp_path: Path) -> None:
    """--strict is what makes the tests above mean something: a page naming an object that does not exist, or a
    link to a page that does not exist, fails the build."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\n::: tractkv.NoSuchThing\n")
    config = tmp_path / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    text = re.sub(r"(?ms)^nav:.*", "", text).replace("docs_dir: docs", f"docs_dir: {docs}")
    text = text.replace(" tools/", f" {ROOT}/tools/").replace("paths: [.]", f"paths: [{ROOT}]")
    config.write_text(text)
    done = build(tmp_path / "site", config)
    assert done.returncode != 0
    assert "tractkv.NoSuchThing" in done.stdout + done.stderr
    (docs / "index.md").write_text("# x\n\n[gone](gone.md)\n")
    done = build(tmp_path / "site", config)
    assert done.returncode != 0
    assert "gone.md" in done.stdout + done.stderr


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_screenshots_of_the_built_site(site: Path, tmp_path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    for binary in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(binary) is None:
            pytest.fail(f"{binary} is missing: run tools/install-browser.sh (CI does)")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--window-size=1280,1000",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(15)
    SHOTS.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for name, path, title in (
            ("home", "/", "tractkv"),
            ("guide", "/guide/", "User guide"),
            ("format", "/format/", None),
            ("api", "/api/tractkv/", "tractkv"),
            ("cli", "/cli/", "Command line"),
            ("http-api", "/http-api/", "HTTP API"),
        ):
            driver.get(base + path)
            h1 = driver.find_element(By.CSS_SELECTOR, "article h1").text
            if title is not None:
                assert h1 == title
            nav = driver.find_element(By.CSS_SELECTOR, "nav.md-nav--primary").text
            assert "Python API" in nav
            assert "Command line" in nav
            assert driver.save_screenshot(str(SHOTS / f"docs-{name}.png"))
        # search runs in the page (a local index, no service): a command is found by its name
        driver.get(base + "/")
        driver.find_element(By.CSS_SELECTOR, "label.md-search__icon, .md-search__input").click()
        driver.find_element(By.CSS_SELECTOR, "input.md-search__input").send_keys("cherry-pick")
        WebDriverWait(driver, 15).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item"), "search results"
        )
        hits = driver.find_element(By.CSS_SELECTOR, ".md-search-result").text
        assert "cherry-pick" in hits
        assert driver.save_screenshot(str(SHOTS / "docs-search.png"))
    finally:
        driver.quit()
        server.shutdown()
