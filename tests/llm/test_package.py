"""The llm extra stays optional: `import tractkv` loads no part of tractkv.llm (the facade imports it on the
first model call) and so never httpx or the HTTP clients; tractkv.llm's public names are pinned."""

from __future__ import annotations

import subprocess
import sys
import types

import tractkv.llm


def test_import_tractkv_does_not_load_the_http_clients_or_httpx() -> None:
    code = (
        "import tractkv, sys; "
        "loaded = {m for m in sys.modules if m == 'httpx' or m.startswith('tractkv.llm')}; "
        "assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_scripted_llm_does_not_load_httpx() -> None:
    code = (
        "import sys; from tractkv.llm import ScriptedLLM; ScriptedLLM(['x']).chat([]); "
        "assert 'httpx' not in sys.modules"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_all_is_sorted_and_complete() -> None:
    """__all__ lists exactly the public names: what the module defines plus the lazily loaded clients."""
    names = tractkv.llm.__all__
    assert names == sorted(names)
    defined = {
        name
        for name, value in vars(tractkv.llm).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    } - {"annotations", "TYPE_CHECKING", "Any"}
    assert set(names) == defined | {"AnthropicClient", "OpenAIClient"}
    for name in names:
        assert getattr(tractkv.llm, name).__name__ == name
