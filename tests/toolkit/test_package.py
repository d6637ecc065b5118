"""The toolkit's public names load lazily: ``import tractkv`` stays light."""

from __future__ import annotations

import ast
import subprocess
import sys

from tractkv import toolkit


def test_import_tractkv_does_not_load_the_agent_toolkit_or_model_clients() -> None:
    code = "import sys, tractkv; print(sorted(m for m in sys.modules if m.startswith(('tractkv', 'httpx'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(ast.literal_eval(out))
    # the toolkit sits above the facade; the model clients (and httpx) load on first use
    assert sorted(m for m in loaded if m.startswith("tractkv.toolkit")) == []
    clients = {"tractkv.llm.openai_client", "tractkv.llm.anthropic_client", "tractkv.llm._sdk", "httpx"}
    clients |= {"openai", "anthropic", "google.genai", "httpx2"}  # the SDKs
    assert loaded & clients == set()


def test_public_names_resolve() -> None:
    assert sorted(toolkit.__all__) == sorted(toolkit._LAZY)
    for name in toolkit.__all__:
        assert getattr(toolkit, name) is not None
    assert toolkit.export_conversation.__module__ == "tractkv.toolkit.transcript"
    assert toolkit.ToolUsage.__module__ == toolkit.UsageNode.__module__ == "tractkv.engine.usage.tree"
    assert toolkit.ToolStats.__module__ == "tractkv.engine.usage.stats"
