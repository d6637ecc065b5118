""".ci/run: the README's test command fails CI when any step fails, and the SDK floor step runs every test file
that uses an SDK, on the floors pyproject.toml and the README state."""

from __future__ import annotations

import ast
import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CI = (ROOT / ".ci" / "run").read_text()
README = (ROOT / "README.md").read_text()
TEST_COMMAND = "tools/install-browser.sh && pip install 'pip>=25.1' && pip install -e . --group dev && pytest"


def test_the_readme_test_command_is_run_verbatim_in_a_subshell() -> None:
    assert f"```sh\n{TEST_COMMAND}\n```" in README
    assert f"\n( {TEST_COMMAND} )\n" in CI


def test_a_failing_step_of_the_test_command_fails_the_script(tmp_path: Path) -> None:
    """Run .ci/run's line under its own shell options with stubs: a failing install step must end the script
    with an error, not skip pytest and carry on."""
    line = next(x for x in CI.splitlines() if TEST_COMMAND in x)
    (tmp_path / "tools").mkdir()
    (tmp_path / "bin").mkdir()
    stubs = {"tools/install-browser.sh": "exit 3", "bin/pip": "exit 0", "bin/pytest": "echo ran-pytest"}
    for name, body in stubs.items():
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    script = f"set -euo pipefail\nexport PATH={tmp_path / 'bin'}:$PATH\n{line}\necho carried-on\n"
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert "carried-on" not in result.stdout
    assert "ran-pytest" not in result.stdout


def _uses_an_sdk(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        if any(n.split(".")[0] in {"openai", "anthropic", "google"} for n in names):
            return True
    return False


def test_the_floor_step_runs_every_test_file_that_uses_an_sdk() -> None:
    selection = next(x for x in CI.splitlines() if x.startswith("sdk_tests=$("))
    assert "$sdk_tests" in CI.split(selection, 1)[1].split("pytest", 1)[1].splitlines()[0]
    command = selection[len("sdk_tests=$(") : -1]
    found = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, check=True)
    selected = set(found.stdout.split())
    expected = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py") if _uses_an_sdk(p)}
    assert "tests/llm/test_sdk_pairing.py" in expected
    assert "tests/llm/test_gemini_dialect.py" in expected
    assert selected == expected


def test_the_floors_are_stated_the_same_in_pyproject_and_the_readme() -> None:
    test_group = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]["test"]
    floors = {}
    for dependency in test_group:
        match = re.fullmatch(r"(openai|anthropic|google-genai)>=(\S+)", dependency)
        if match:
            floors[match[1]] = match[2]
    assert set(floors) == {"openai", "anthropic", "google-genai"}
    paragraph = README.split("**SDK versions.**", 1)[1].split("\n\n", 1)[0]
    for name, version in floors.items():
        assert f"`{name}>={version}`" in paragraph
