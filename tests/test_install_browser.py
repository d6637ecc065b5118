"""tools/install-browser.sh (the first step of the README's test command): says what it uses, honours
TRACTKV_CHROMIUM / TRACTKV_CHROMEDRIVER on any system, and keeps Debian's launcher noise out (issue 17, item 16)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "install-browser.sh"


def _stub(path: Path, version: str) -> Path:
    # like Debian's /usr/bin/chromium launcher: noise on stderr, then the version
    path.write_text(
        f"#!/bin/sh\necho '{path}: 9: [: 25276063744: unexpected operator' >&2\necho '{version}'\n"
    )
    path.chmod(0o755)
    return path


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_a_browser_named_by_the_environment_is_used_and_named(tmp_path: Path) -> None:
    chrome = _stub(tmp_path / "chrome", "Google Chrome 150.0.1")
    driver = _stub(tmp_path / "chromedriver", "ChromeDriver 150.0.1")
    result = _run({"TRACTKV_CHROMIUM": str(chrome), "TRACTKV_CHROMEDRIVER": str(driver)})
    assert result.returncode == 0, result.stderr
    assert "Google Chrome 150.0.1" in result.stderr
    assert "ChromeDriver 150.0.1" in result.stderr
    assert "unexpected operator" not in result.stdout + result.stderr


def test_half_a_configuration_is_refused_with_what_to_set(tmp_path: Path) -> None:
    chrome = _stub(tmp_path / "chrome", "Google Chrome 150.0.1")
    result = _run({"TRACTKV_CHROMIUM": str(chrome), "TRACTKV_CHROMEDRIVER": ""})
    assert result.returncode == 1
    assert "set both TRACTKV_CHROMIUM and TRACTKV_CHROMEDRIVER" in result.stderr
    result = _run({"TRACTKV_CHROMIUM": str(chrome), "TRACTKV_CHROMEDRIVER": str(tmp_path / "missing")})
    assert result.returncode == 1


def test_the_installed_debian_browser_is_reported_without_launcher_noise() -> None:
    result = _run({"TRACTKV_CHROMIUM": "", "TRACTKV_CHROMEDRIVER": ""})
    assert result.returncode == 0, result.stderr
    assert "Chromium" in result.stderr
    assert "ChromeDriver" in result.stderr
    assert "unexpected operator" not in result.stderr
