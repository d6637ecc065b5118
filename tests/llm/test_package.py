"""The SDK extras stay optional: `import tractkv` loads no part of tractkv.llm (the facade imports it on the
first model call) and so never an SDK or the SDK clients; tractkv.llm's public names are pinned."""

from __future__ import annotations

import subprocess
import sys
import types

import tractkv.llm

SDKS = ("openai", "anthropic", "google.genai", "httpx", "httpx2")


def _loaded_after(code: str) -> set[str]:
    probe = (
        f"{code}; import sys; print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'openai', 'anthropic', 'httpx', 'httpx2'} or m.startswith(('google.genai', 'tractkv.llm'))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(eval(result.stdout))  # a printed list of module names


def test_import_tractkv_loads_no_sdk_and_no_client() -> None:
    assert _loaded_after("import tractkv") == set()


def test_scripted_llm_and_the_renderers_load_no_sdk() -> None:
    loaded = _loaded_after(
        "from tractkv.llm import ScriptedLLM, openai_params, responses_params, anthropic_params; "
        "ScriptedLLM(['x']).chat([])"
    )
    assert {m for m in loaded if m.split(".")[0] in SDKS or m.startswith("google.genai")} == set()
    assert "tractkv.llm._sdk" not in loaded


def test_all_is_sorted_and_complete() -> None:
    """__all__ lists exactly the public names: what the module defines plus the lazily loaded clients."""
    names = tractkv.llm.__all__
    assert names == sorted(names)
    defined = {
        name
        for name, value in vars(tractkv.llm).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    } - {"annotations", "TYPE_CHECKING", "Any"}
    assert set(names) == defined | {"AnthropicClient", "GeminiClient", "OpenAIClient"}
    for name in names:
        assert getattr(tractkv.llm, name).__name__ == name
