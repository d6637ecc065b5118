"""CHANGELOG.md follows Keep a Changelog 1.1.0, and every deprecation the package raises is listed there with the
release that removes it, the same release its warning names.

The format: one ``# Changelog`` title; ``## [Unreleased]`` first, then ``## [X.Y.Z] - YYYY-MM-DD`` headings,
newest first, each version SemVer; under each, ``###`` groups among Added, Changed, Deprecated, Removed, Fixed,
Security (each once, in that order). The version ``pyproject.toml`` declares (``tractkv/_version.py``) is either
a released heading or the one the Unreleased section names as its release (``Next release: X.Y.Z``).
"""

from __future__ import annotations

import ast
import contextlib
import datetime
import re
import warnings
from pathlib import Path

import pytest

import tractkv.tract
from tractkv import Tract, TractError, __version__

ROOT = Path(__file__).resolve().parent.parent
CHANGELOG = ROOT / "CHANGELOG.md"
GROUPS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
# semver.org's regular expression for a version (no leading zeros, optional pre-release and build).
SEMVER = (
    r"(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)"
    r"(?:-(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?"
)
RELEASE_HEADING = re.compile(rf"## \[(?P<version>{SEMVER})\] - (?P<date>\d{{4}}-\d{{2}}-\d{{2}})")
NEXT_RELEASE = re.compile(rf"^Next release: (?P<version>{SEMVER})\.?$", re.MULTILINE)
REMOVED_IN = re.compile(rf"removed in (?P<version>{SEMVER})")
# A Deprecated entry: "- `name` ... Removed in X.Y.Z." (the name as the warning's text starts with it).
DEPRECATED_ENTRY = re.compile(rf"^- `(?P<name>[^`]+)`.*?[Rr]emoved in (?P<version>{SEMVER})\b", re.MULTILINE)


def _key(version: str) -> tuple[int, ...]:
    """A release's order (pre-releases and build metadata are not used by this project's headings)."""
    return tuple(int(n) for n in re.split(r"[-+]", version)[0].split("."))


def _sections(text: str) -> list[tuple[str, str]]:
    """The ``##`` headings and the text under each, in order (fenced code skipped: no ``##`` lines there)."""
    parts = re.split(r"^(## .*)$", text, flags=re.MULTILINE)
    return [(parts[i].strip(), parts[i + 1]) for i in range(1, len(parts), 2)]


def check_changelog(text: str, version: str) -> list[str]:
    """What is wrong with ``text`` as this project's changelog, for a package at ``version`` (empty: nothing)."""
    problems: list[str] = []
    lines = text.splitlines()
    if not lines or lines[0] != "# Changelog":
        problems.append("the first line is not '# Changelog'")
    if sum(1 for line in lines if line.startswith("# ")) != 1:
        problems.append("more than one '# ' title")
    sections = _sections(text)
    if not sections or sections[0][0] != "## [Unreleased]":
        problems.append("the first '##' section is not '## [Unreleased]'")
    released: list[tuple[str, datetime.date]] = []
    for heading, _ in sections[1:]:
        match = RELEASE_HEADING.fullmatch(heading)
        if match is None:
            problems.append(f"{heading!r} is not '## [X.Y.Z] - YYYY-MM-DD' with a SemVer version")
            continue
        try:
            date = datetime.date.fromisoformat(match["date"])
        except ValueError:
            problems.append(f"{heading!r}: {match['date']} is not a date")
            continue
        released.append((match["version"], date))
    for heading, body in sections:
        groups = re.findall(r"^### (.*)$", body, flags=re.MULTILINE)
        unknown = [g for g in groups if g not in GROUPS]
        if unknown:
            problems.append(f"{heading}: groups {unknown} are not Keep a Changelog's {list(GROUPS)}")
        known = [g for g in groups if g in GROUPS]
        if known != sorted(set(known), key=GROUPS.index):
            problems.append(f"{heading}: groups {known} repeat or are out of order {list(GROUPS)}")
        if re.search(r"^#{4,} |^#{1,2}[^#\s]", body, flags=re.MULTILINE):
            problems.append(f"{heading}: a heading other than '###' groups")
    versions = [v for v, _ in released]
    if len(set(versions)) != len(versions):
        problems.append(f"a version is listed twice: {versions}")
    if versions != sorted(versions, key=_key, reverse=True):
        problems.append(f"versions are not newest first: {versions}")
    dates = [d for _, d in released]
    if dates != sorted(dates, reverse=True):
        problems.append("release dates are not newest first")
    unreleased = sections[0][1] if sections else ""
    upcoming = [m["version"] for m in NEXT_RELEASE.finditer(unreleased)]
    if len(upcoming) > 1:
        problems.append(f"the Unreleased section names more than one next release: {upcoming}")
    if upcoming and versions and _key(upcoming[0]) <= _key(versions[0]):
        problems.append(f"the next release {upcoming[0]} is not after the newest released {versions[0]}")
    if version not in versions and version not in upcoming:
        problems.append(f"pyproject's version {version} is neither a released heading nor the next release")
    return problems


def removal_releases(text: str) -> dict[str, str]:
    """The Deprecated entries of the Unreleased section: the deprecated name and the release that removes it."""
    sections = _sections(text)
    unreleased = sections[0][1] if sections else ""
    group = re.search(r"^### Deprecated$(.*?)(?=^### |\Z)", unreleased, flags=re.MULTILINE | re.DOTALL)
    return {m["name"]: m["version"] for m in DEPRECATED_ENTRY.finditer(group[1] if group else "")}


def test_the_changelog_follows_keep_a_changelog() -> None:
    assert check_changelog(CHANGELOG.read_text(encoding="utf-8"), __version__) == []


def test_the_format_check_finds_each_kind_of_violation() -> None:
    good = CHANGELOG.read_text(encoding="utf-8")
    assert check_changelog(good, __version__) == []
    released = "## [0.1.0] - 2026-11-28\n\n### Added\n\n- x\n"
    base = "# Changelog\n\n## [Unreleased]\n\n### Added\n\n- y\n\n"
    assert check_changelog(base + released, "0.1.0") == []
    violations = {
        "no title": (base.replace("# Changelog\n", "") + released, "0.1.0"),
        "no unreleased": (base.replace("## [Unreleased]", "## [0.2.0] - 2026-11-29") + released, "0.1.0"),
        "not semver": (base + released.replace("0.1.0", "0.1"), "0.1"),
        "no date": (base + released.replace(" - 2026-11-28", ""), "0.1.0"),
        "bad date": (base + released.replace("2026-11-28", "2026-13-01"), "0.1.0"),
        "unknown group": (base.replace("### Added", "### New") + released, "0.1.0"),
        "group twice": (base + released + "\n### Added\n\n- z\n", "0.1.0"),
        "order": (base + "## [0.0.1] - 2026-11-01\n\n" + released, "0.1.0"),
        "version absent": (base + released, "0.3.0"),
        "next not after": (base.replace("- y\n", "- y\n\nNext release: 0.1.0\n") + released, "0.1.0"),
    }
    for name, (text, version) in violations.items():
        assert check_changelog(text, version), name
    upcoming = "# Changelog\n\n## [Unreleased]\n\nNext release: 0.1.0\n\n### Added\n\n- y\n"
    assert check_changelog(upcoming, "0.1.0") == []


def _deprecation_texts() -> list[tuple[str, str]]:
    """Every ``warnings.warn(..., DeprecationWarning)`` in ``tractkv/``: its place and its message's literal text."""
    found: list[tuple[str, str]] = []
    for path in sorted((ROOT / "tractkv").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = sum(isinstance(n, ast.Name) and n.id == "DeprecationWarning" for n in ast.walk(tree))
        calls = 0
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not any(
                isinstance(a, ast.Name) and a.id == "DeprecationWarning"
                for a in [*node.args, *(k.value for k in node.keywords)]
            ):
                continue
            calls += 1
            message = node.args[0] if node.args else None
            text = "".join(
                n.value for n in ast.walk(message) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            )
            found.append((f"{path.relative_to(ROOT)}:{node.lineno}", text))
        # DeprecationWarning used in any other way (raised, subclassed, held in a name) escapes this check.
        assert names == calls, f"{path}: DeprecationWarning used outside a warnings.warn(...) call"
    return found


def test_every_deprecation_warning_names_a_removal_release_the_changelog_lists() -> None:
    listed = removal_releases(CHANGELOG.read_text(encoding="utf-8"))
    texts = _deprecation_texts()
    assert texts, "no deprecation found: the scan is broken"
    for place, text in texts:
        match = REMOVED_IN.search(text)
        assert match, f"{place}: the warning names no removal release ('removed in X.Y.Z'): {text!r}"
        assert match["version"] in listed.values(), (
            f"{place}: {match['version']} is not a removal release listed"
        )
        assert _key(match["version"]) > _key(__version__), (
            f"{place}: removal in {match['version']} is overdue"
        )


DEPRECATED_USES = {
    "CommitInfo.commit_hash": lambda t: t.log()[0].commit_hash,
    "Tract.run": lambda t: t.run(),
    "Tract.as_tools": lambda t: t.as_tools(),
    "Tract.export": lambda t: t.export(),
    "Tract.rerun_tool_usage": lambda t: t.rerun_tool_usage("nope"),
}


def test_each_deprecated_use_warns_with_the_release_its_changelog_entry_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed = removal_releases(CHANGELOG.read_text(encoding="utf-8"))
    monkeypatch.setattr(tractkv.tract, "_warned", set())  # the Tract aliases warn once per process
    raised: dict[str, str] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Tract.open(None, token_budget=1000) as t:
            t.user("hi")
            for use in DEPRECATED_USES.values():
                with contextlib.suppress(TractError):  # only the warning matters (run has no model, ...)
                    use(t)
    for warning in caught:
        if issubclass(warning.category, DeprecationWarning):
            text = str(warning.message)
            (name,) = [n for n in listed if text.startswith(n)] or [text]
            match = REMOVED_IN.search(text)
            assert match, f"{text!r} names no removal release"
            raised[name] = match["version"]
    assert raised == listed, "the changelog's Deprecated entries and the warnings raised differ"
    assert set(raised) == {*DEPRECATED_USES, "Tract.open(token_budget=N)"}
