"""History: refs and revision syntax (``refs``), the reflog (``reflog``), commit-graph walks (``graph``), the
lane layout ``log --graph`` draws (``lanes``), one description of a commit (``describe``), and the semantic
validator every object passes before a store takes it (``validate``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv import _lazy

if TYPE_CHECKING:
    from .describe import (
        clip,
        describe_commit,
        short_id,
    )
    from .graph import (
        ahead_behind,
        ancestors,
        first_parent_chain,
        is_ancestor,
        iter_log,
        merge_base,
        parents_first,
    )
    from .lanes import (
        LaneLayout,
        layout_lanes,
    )
    from .reflog import (
        iter_all_reflogs,
        iter_reflog,
        log_ref_move,
    )
    from .refs import (
        HEAD,
        HEADS,
        REMOTES,
        SYMBOLIC,
        TAGS,
        branch_name,
        branch_ref,
        check_branch_name,
        peel,
        read_head,
        resolve_revision,
        short_ref,
        tag_ref,
    )
    from .validate import (
        MAX_FUTURE_US,
        OPERATIONS,
        TS_MAX,
        TS_MIN,
        MissingLink,
        ObjectRuleError,
        Tags,
        check,
        check_commit,
        check_tag,
        fsck_objects,
        trusted_tag,
    )
else:
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "HEAD": ".refs",
            "HEADS": ".refs",
            "LaneLayout": ".lanes",
            "MAX_FUTURE_US": ".validate",
            "MissingLink": ".validate",
            "OPERATIONS": ".validate",
            "ObjectRuleError": ".validate",
            "REMOTES": ".refs",
            "SYMBOLIC": ".refs",
            "TAGS": ".refs",
            "TS_MAX": ".validate",
            "TS_MIN": ".validate",
            "Tags": ".validate",
            "ahead_behind": ".graph",
            "ancestors": ".graph",
            "branch_name": ".refs",
            "branch_ref": ".refs",
            "check": ".validate",
            "check_branch_name": ".refs",
            "check_commit": ".validate",
            "check_tag": ".validate",
            "clip": ".describe",
            "describe_commit": ".describe",
            "first_parent_chain": ".graph",
            "fsck_objects": ".validate",
            "is_ancestor": ".graph",
            "iter_all_reflogs": ".reflog",
            "iter_log": ".graph",
            "iter_reflog": ".reflog",
            "layout_lanes": ".lanes",
            "log_ref_move": ".reflog",
            "merge_base": ".graph",
            "parents_first": ".graph",
            "peel": ".refs",
            "read_head": ".refs",
            "resolve_revision": ".refs",
            "short_id": ".describe",
            "short_ref": ".refs",
            "tag_ref": ".refs",
            "trusted_tag": ".validate",
        },
    )

__all__ = [
    "HEAD",
    "HEADS",
    "MAX_FUTURE_US",
    "OPERATIONS",
    "REMOTES",
    "SYMBOLIC",
    "TAGS",
    "TS_MAX",
    "TS_MIN",
    "LaneLayout",
    "MissingLink",
    "ObjectRuleError",
    "Tags",
    "ahead_behind",
    "ancestors",
    "branch_name",
    "branch_ref",
    "check",
    "check_branch_name",
    "check_commit",
    "check_tag",
    "clip",
    "describe_commit",
    "first_parent_chain",
    "fsck_objects",
    "is_ancestor",
    "iter_all_reflogs",
    "iter_log",
    "iter_reflog",
    "layout_lanes",
    "log_ref_move",
    "merge_base",
    "parents_first",
    "peel",
    "read_head",
    "resolve_revision",
    "short_id",
    "short_ref",
    "tag_ref",
    "trusted_tag",
]
