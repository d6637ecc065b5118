"""A user's type check of tractkv (issue 35, item 4): ``mypy --strict`` checks an SDK call built from
``CompiledContext.to_*_params()`` against the SDKs' own parameter types, so a request meant for one provider
passed to another, or a malformed message added to one, is reported before it runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")  # the SDK-floor venvs of .ci/run install no type checker
ROOT = Path(__file__).resolve().parent.parent

# Every line that ends in `# wrong` must get a mypy error, and no other line may. The SDKs are imported after
# tractkv on one line: .ci/run's SDK-floor step selects files with a line that starts by importing an SDK, and
# this one needs mypy, which that venv does not install.
PROGRAM = """\
import tractkv, anthropic, openai


def ask(ctx: tractkv.CompiledContext, gpt: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    gpt.chat.completions.create(model="gpt-4o", **ctx.to_openai_params())
    gpt.chat.completions.create(model="gpt-4o", **ctx.to_openai_params(strict=True))
    gpt.responses.create(model="gpt-4o", **ctx.to_responses_params())
    claude.messages.create(model="claude-sonnet-4-5", max_tokens=1024, **ctx.to_anthropic_params())
    params = ctx.to_openai_params()
    params["messages"].append({"role": "user", "content": "Hello"})
    reply = claude.messages.create(model="claude-sonnet-4-5", max_tokens=1024, **ctx.to_anthropic_params())
    print(reply.content)


def mixed_up(ctx: tractkv.CompiledContext, gpt: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    gpt.chat.completions.create(model="gpt-4o", **ctx.to_anthropic_params())  # wrong
    claude.messages.create(model="claude-sonnet-4-5", max_tokens=1024, **ctx.to_openai_params())  # wrong
    gpt.responses.create(model="gpt-4o", **ctx.to_openai_params())  # wrong
    claude.messages.create(model="claude-sonnet-4-5", **ctx.to_anthropic_params())  # wrong
    params = ctx.to_openai_params()
    params["messages"].append({"role": "usr", "content": "Hello"})  # wrong
    params["tool"] = []  # wrong
"""


def test_mypy_strict_checks_sdk_calls_built_from_compiled_params(tmp_path: Path) -> None:
    program = tmp_path / "user_program.py"
    program.write_text(PROGRAM)
    # From the project root, so mypy reads tractkv from this tree with the project's own configuration (and
    # shares tests/test_lint.py's cache).
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(program)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    output = result.stdout + result.stderr
    errors = {int(m[1]) for m in re.finditer(r"user_program\.py:(\d+): error:", output, re.M)}
    wrong = {n for n, line in enumerate(PROGRAM.splitlines(), 1) if line.endswith("# wrong")}
    assert len(wrong) == 6
    assert errors == wrong, output
    assert "import-not-found" not in output, output
    assert "import-untyped" not in output, output
