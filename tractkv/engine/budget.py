"""The stored token budget of a branch: a local setting (``meta`` row ``budget:<branch ref>`` -> CBOR int),
never synced, like the remotes config and ``set_tools``'s setting.

``status`` reports use against it; a ``Tract.open(token_budget=...)`` argument overrides it for that handle.
"""

from __future__ import annotations

from tractkv import codec
from tractkv.errors import DecodeError, DetachedHead, InvalidInput
from tractkv.store import Reader, Table, WriteBatch

from .session import Session

BUDGET = b"budget:"  # meta key prefix: branch ref -> the branch's token budget (CBOR int)


def stored_budget(reader: Reader, ref: str | None) -> int | None:
    """The budget stored for branch ref ``ref`` (None: none stored, a detached HEAD, or an unreadable row)."""
    if ref is None:
        return None
    raw = reader.table_get(Table.META, BUDGET + ref.encode())
    if raw is None:
        return None
    try:
        value = codec.loads(raw)
    except DecodeError:  # a damaged local setting reads as no budget; it changes nothing compile returns
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def set_budget(session: Session, max_tokens: int | None) -> int | None:
    """Store ``max_tokens`` as the session's branch budget (None clears it); returns what is stored now.

    Raises:
        InvalidInput: not a positive int. DetachedHead: HEAD is detached (a budget belongs to a branch).
    """
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0
    ):
        raise InvalidInput(f"a token budget is a positive number of tokens, not {max_tokens!r}")
    session.check_writes("set_budget", in_batch=False)
    if session.branch_ref is None:
        raise DetachedHead(str(session.detached), "set a budget")
    batch = session.store.new_batch()
    batch.table_put(
        Table.META,
        BUDGET + session.branch_ref.encode(),
        None if max_tokens is None else codec.dumps(max_tokens),
    )
    session.store.apply(batch)
    return max_tokens


def drop_budget(batch: WriteBatch, ref: str) -> None:
    """Stage the removal of ``ref``'s budget row (a deleted branch keeps no setting)."""
    if batch.table_get(Table.META, BUDGET + ref.encode()) is not None:
        batch.table_put(Table.META, BUDGET + ref.encode(), None)
