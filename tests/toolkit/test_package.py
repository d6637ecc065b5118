"""The toolkit's public names load lazily: ``import tractkv`` stays light."""

from __future__ import annotations

import subprocess
import sys

from tractkv import toolkit


def test_import_tractkv_does_not_load_the_agent_toolkit() -> None:
    code = (
        "import sys, tractkv; "
        "print(sorted(m for m in sys.modules if m.startswith('tractkv.toolkit') or m.startswith('tractkv.llm')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['tractkv.toolkit', 'tractkv.toolkit.hooks', 'tractkv.toolkit.queries']"


def test_public_names_resolve() -> None:
    assert sorted(toolkit.__all__) == sorted(toolkit._LAZY)
    for name in toolkit.__all__:
        assert getattr(toolkit, name) is not None
    assert toolkit.export_conversation.__module__ == "tractkv.toolkit.export"
    assert toolkit.ToolUsage.__module__ == toolkit.UsageNode.__module__ == "tractkv.engine.usage_tree"
    assert toolkit.ToolStats.__module__ == "tractkv.engine.usage_stats"
