"""Adapters that let other agent frameworks keep their state in a tractkv store.

* :mod:`tractkv.integrations.langgraph`: ``TractkvSaver``, a LangGraph checkpointer (extra ``langgraph``).
* :mod:`tractkv.integrations.openai_agents`: ``TractkvSession``, an OpenAI Agents SDK session (extra
  ``agents``).

Each module imports its framework when it is imported itself (never from ``import tractkv``), and raises
:class:`~tractkv.errors.MissingExtra` naming the extra to install when the framework is absent. Both keep
everything a resume reads as immutable objects reachable from a branch, so a store holding threads or
sessions syncs (push, pull, clone) like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv.errors import InvalidInput, MissingExtra

if TYPE_CHECKING:
    from tractkv.tract import Tract

__all__ = [
    "MAX_ID_BYTES",
    "branch_component",
    "check_id",
    "check_not_checked_out",
    "missing_extra",
    "parse_component",
]

MAX_ID_BYTES = 200  # an id's encoded branch-name component (a ref name is at most 511 bytes in all)
_KEEP = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def branch_component(name: str) -> str:
    """``name`` as one branch-name component: ASCII letters, digits, ``_`` and ``-`` kept, every other
    character as ``%XX`` per UTF-8 byte (so ``/``, ``.``, ``:`` and spaces never reach the ref name). The
    empty string is ``%``, which no encoding of a non-empty name produces alone."""
    if not name:
        return "%"
    return "".join(ch if ch in _KEEP else "".join(f"%{b:02X}" for b in ch.encode()) for ch in name)


def check_id(what: str, value: str) -> str:
    """``value``'s branch-name component, or :class:`~tractkv.errors.InvalidInput` when it is longer than
    :data:`MAX_ID_BYTES` (a ref name holds at most 511 bytes, and a LangGraph subgraph's branch adds its
    namespace to the thread's): refused before anything is written, never half-way through a run."""
    component = branch_component(value)
    if len(component) > MAX_ID_BYTES:
        raise InvalidInput(
            f"{what} {value[:40]!r}{'...' if len(value) > 40 else ''} is too long for a branch name: "
            f"{len(component)} bytes encoded, at most {MAX_ID_BYTES} (ASCII letters, digits, _ and - take one "
            "byte, any other character 3 per UTF-8 byte); use a shorter id, e.g. a hash of it"
        )
    return component


def parse_component(component: str) -> str | None:
    """The name :func:`branch_component` encoded as ``component``, or None when it is not such an encoding."""
    if component == "%":
        return ""
    out = bytearray()
    i = 0
    while i < len(component):
        ch = component[i]
        if ch == "%":
            try:
                out.append(int(component[i + 1 : i + 3], 16))
            except ValueError:
                return None
            i += 3
        elif ch in _KEEP:
            out += ch.encode()
            i += 1
        else:
            return None
    try:
        name = out.decode()
    except UnicodeDecodeError:
        return None
    return name if name and branch_component(name) == component else None


def missing_extra(feature: str, extra: str, exc: ImportError) -> MissingExtra:
    """The error an integration raises when its framework (``exc.name``) is not installed."""
    return MissingExtra("", extra, exc.name, feature=feature)


def check_not_checked_out(tract: Tract, names: list[str], what: str) -> None:
    """Refuse (:class:`~tractkv.errors.InvalidInput`) to delete ``what``'s branches ``names`` when one is
    checked out: the branch of ``tract``, or the one the store's HEAD names (the next ``tractkv`` command or
    ``Tract.open`` would stand on a deleted branch)."""
    from tractkv.engine.history import HEADS, read_head

    stored, _tip = read_head(tract.store)
    for name in names:
        if name == tract.current_branch or HEADS + name == stored:
            raise InvalidInput(
                f"{what}: its branch {name!r} is checked out; switch to another branch first, then delete it"
            )
