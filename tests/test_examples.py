"""The scripts in examples/ run offline on scripted models and do what their docstrings say.

Each script's ``main()`` is run in-process (loaded by path, as a user would copy it) with its assertions on
the returned value and the printed transcript, and each runs once as ``python examples/<name>.py``.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tractkv
from tractkv.llm import ScriptedLLM
from tractkv.toolkit import SUPERVISOR_PROFILE

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def load(name: str) -> dict[str, Any]:
    """The example's module namespace (run_path: nothing is cached into examples/)."""
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name=f"example_{name}")


def test_tool_agent_summarizes_the_page_and_compresses_the_search(capsys: pytest.CaptureFixture[str]) -> None:
    example = load("tool_agent")
    summaries = ["Pro plan: 20 EUR/month. Team plan: 50 EUR/month.", "8 pricing pages found."]
    summarizer = ScriptedLLM(summaries)
    out = example["main"](summarizer=summarizer)
    printed = capsys.readouterr().out

    assert out["answer"] == "Pro costs 20 EUR a month and Team 50 EUR."
    # the fetched page entered the context as its summary, written with the tool's own instructions
    assert out["page_in_context"] == summaries[0]
    assert out["page_original"] == example["PAGE"]
    page_request = summarizer.calls[0].messages
    assert "Keep only the prices, per plan." in page_request[0].content
    assert page_request[1].content == example["PAGE"]
    # the search result (under the threshold) went in raw, and compress_tool_calls summarized it
    assert out["compressed"] == 1
    assert "example.com/pricing/7" in summarizer.calls[1].messages[1].content
    assert summarizer.remaining == 0
    assert out["tokens_after"] < out["tokens_before"]
    assert f"compress_tool_calls: {out['tokens_before']} -> {out['tokens_after']} tokens" in printed
    assert f"tool: {summaries[0]}" in printed


SUPERVISOR_SCRIPT = [
    {"role": "assistant", "content": None, "tool_calls": [{"id": "s1", "name": "compile", "arguments": {}}]},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "s2", "name": "branch", "arguments": {"name": "research-retry", "source": "research~1"}}
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "s3", "name": "commit", "arguments": {"content": "Not Sydney.", "role": "user"}}
        ],
    },
    "Moved the agent.",
]


def test_supervisor_moves_the_managed_agent_to_a_corrected_branch(capsys: pytest.CaptureFixture[str]) -> None:
    boss_llm = ScriptedLLM(SUPERVISOR_SCRIPT)
    out = load("supervisor")["main"](llm=boss_llm)
    printed = capsys.readouterr().out

    assert out["first_answer"] == "The capital of Australia is Sydney."
    assert out["report"] == "Moved the agent."
    assert out["agent_branch"] == "research-retry"  # the supervisor's branch tool moved the agent
    assert out["second_answer"] == "The capital of Australia is Canberra."
    assert out["old_branch_answer"] == "The capital of Australia is Sydney."  # the wrong try is kept
    assert out["supervisor_tools"] == ["compile", "branch", "commit"]
    # the supervisor was offered the supervisor profile (all built-ins, described as acting on the agent)
    offered = boss_llm.calls[0].tools or []
    assert len(offered) == len(SUPERVISOR_PROFILE.tool_names)
    assert all("managed agent" in t["function"]["description"] for t in offered)
    # compile showed the supervisor the agent's context, wrong answer included
    assert "Sydney" in boss_llm.calls[1].messages[-1].content
    assert "--- research agent, after supervision (branch research-retry)" in printed
    assert "user: Not Sydney." in printed


def test_nested_orchestration_records_a_usage_tree(capsys: pytest.CaptureFixture[str]) -> None:
    out = load("nested")["main"]()
    printed = capsys.readouterr().out

    assert out["answer"] == "Report: caching saves cost but adds risk."
    (root,) = out["tree"]
    assert root.usage.tool_name == "report"
    assert [c.usage.tool_name for c in root.children] == ["search", "search", "count_words"]
    assert [c.usage.arguments for c in root.children[:2]] == [
        {"query": "caching cost"},
        {"query": "caching risk"},
    ]
    assert all(c.usage.parent_id == root.usage.id and c.usage.status == "success" for c in root.children)
    assert out["lines"][0].startswith("report success")
    assert [line.startswith("  ") for line in out["lines"]] == [False, True, True, True]
    assert "\n".join(out["lines"]) in printed


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("tool_agent", "compress_tool_calls:"),
        ("supervisor", "The capital of Australia is Canberra."),
        ("nested", "  count_words success"),
    ],
)
def test_example_runs_as_a_script(name: str, expected: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(tractkv.__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout
    assert list(tmp_path.iterdir()) == []  # nothing written where it ran
