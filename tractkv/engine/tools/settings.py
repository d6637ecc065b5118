"""The branch's tool setting (``set_tools``): the tool set later commits of a branch link, a function of a
session.

The setting is a local ``meta`` row, ``tools:<branch ref>`` -> the id of a stored tool set
(:data:`~tractkv.engine.content.toolsets.ACTIVE_TOOLS`; a gc root). The write path reads it for each commit that gives
no tools of its own (:meth:`~tractkv.engine.session.Session.tools_for_next_commit`; once per batch).
``set_tools(None)`` stores the empty tool set, linked once by the next commit (so the context shows the tools
cleared), then nothing.
"""

from __future__ import annotations

from typing import Any

from tractkv.engine.content import ACTIVE_TOOLS, CACHE_TTLS, put_toolset, tool_schemas
from tractkv.engine.session import Session
from tractkv.errors import DetachedHead, InvalidInput
from tractkv.ids import ObjectId
from tractkv.store import Table


def setting_key(ref: str | None) -> bytes | None:
    """The ``meta`` key of branch ref ``ref``'s tool setting (None: a detached HEAD has none)."""
    return None if ref is None else ACTIVE_TOOLS + ref.encode()


def set_tools(
    session: Session, tools: list[dict[str, Any]] | None, cache: str | None = None
) -> list[dict[str, Any]]:
    """Store the tools later commits of the session's branch link (None: clear them); returns them.
    ``cache`` (``"5m"`` / ``"1h"``) puts a prompt-cache breakpoint after them (recorded in the tool set).

    Raises:
        DetachedHead: HEAD is detached (a setting belongs to a branch).
        InvalidInput: inside a batch, or a malformed tool definition.
    """
    session.check_writes("set_tools", in_batch=False)
    if cache is not None and (cache not in CACHE_TTLS or not tools):
        raise InvalidInput(f"cache must be one of {CACHE_TTLS} and needs tools, not {cache!r}")
    key = setting_key(session.branch_ref)
    if key is None:
        raise DetachedHead(str(session.detached), "set tools")
    schemas = tool_schemas(tools) if tools is not None else []  # None: the empty set, linked once
    batch = session.store.new_batch()
    toolset_id = put_toolset(batch, schemas, cache)
    batch.table_put(Table.META, key, toolset_id.encode())
    session.store.apply(batch)
    return get_tools(session)


def get_tools(session: Session) -> list[dict[str, Any]]:
    """The tools the branch's setting names, or else the tools in force at HEAD."""
    key = setting_key(session.branch_ref)
    raw = session.reader().table_get(Table.META, key) if key is not None else None
    toolset = ObjectId(raw.decode()) if raw is not None else session.head_state().tools
    return [dict(t) for t in session.tools_of(toolset)]
