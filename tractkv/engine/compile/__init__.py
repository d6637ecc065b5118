"""Compile: the state of a commit and the context it compiles to.

Slots and their packed rows (``slots``), the view (``view``), the compile state (``state``), the checkpoint
format (``checkpoint``) and its fsck (``checkpoint_fsck``), the three-way merge of states (``merge3``), the
tool-pairing pass (``pairing``), the drop planner (``window``), spawn/collapse relation rows (``relations``),
the compiler with its caches (``compiler``), message diffs (``diff``) and a commit as users see it
(``info``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv import _lazy

if TYPE_CHECKING:
    from .checkpoint_fsck import (
        check_checkpoints,
        describe_key,
        drop_checkpoints,
    )
    from .compiler import (
        CHECKPOINT_EVERY,
        Compiler,
        context_of,
        load_tools,
        marked_tools,
        merge_payload,
        render_all,
    )
    from .diff import diff_states, tool_changes
    from .info import (
        commit_info,
        text_commit_info,
    )
    from .merge3 import Conflict
    from .pairing import placeholder_tokens
    from .relations import (
        REL_PREFIX,
        SpawnIndex,
        history_marks,
        is_stale_rel,
    )
    from .slots import (
        CHUNK_PREFIX,
        CKPT_PREFIX,
        PRIORITY_NAMES,
        Slot,
        is_stale_row,
    )
    from .state import CompileState
    from .view import View
    from .window import (
        Fit,
        fit,
        units,
    )
else:
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "CHECKPOINT_EVERY": ".compiler",
            "CHUNK_PREFIX": ".slots",
            "CKPT_PREFIX": ".slots",
            "CompileState": ".state",
            "Compiler": ".compiler",
            "Conflict": ".merge3",
            "Fit": ".window",
            "PRIORITY_NAMES": ".slots",
            "REL_PREFIX": ".relations",
            "Slot": ".slots",
            "SpawnIndex": ".relations",
            "View": ".view",
            "check_checkpoints": ".checkpoint_fsck",
            "commit_info": ".info",
            "context_of": ".compiler",
            "describe_key": ".checkpoint_fsck",
            "diff_states": ".diff",
            "drop_checkpoints": ".checkpoint_fsck",
            "fit": ".window",
            "history_marks": ".relations",
            "is_stale_rel": ".relations",
            "is_stale_row": ".slots",
            "load_tools": ".compiler",
            "marked_tools": ".compiler",
            "merge_payload": ".compiler",
            "placeholder_tokens": ".pairing",
            "render_all": ".compiler",
            "text_commit_info": ".info",
            "tool_changes": ".diff",
            "units": ".window",
        },
    )

__all__ = [
    "CHECKPOINT_EVERY",
    "CHUNK_PREFIX",
    "CKPT_PREFIX",
    "PRIORITY_NAMES",
    "REL_PREFIX",
    "CompileState",
    "Compiler",
    "Conflict",
    "Fit",
    "Slot",
    "SpawnIndex",
    "View",
    "check_checkpoints",
    "commit_info",
    "context_of",
    "describe_key",
    "diff_states",
    "drop_checkpoints",
    "fit",
    "history_marks",
    "is_stale_rel",
    "is_stale_row",
    "load_tools",
    "marked_tools",
    "merge_payload",
    "placeholder_tokens",
    "render_all",
    "text_commit_info",
    "tool_changes",
    "units",
]
