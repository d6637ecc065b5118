"""A commit refused while a batch stages it (issue 29, item 11): nothing it staged reaches the store, and the
batch goes on with the commits before and after it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tractkv import Tract
from tractkv.engine.content import content_objects
from tractkv.errors import InvalidInput
from tractkv.model import Blob
from tractkv.store import Table

from .conftest import FakeClock


def _object_ids(t: Tract) -> set[bytes]:
    return {key for key, _ in t.store.table_iter(Table.OBJECTS)}


def _blob_key(payload: dict[str, object]) -> bytes:
    from tractkv.ids import oid_to_raw
    from tractkv.model import object_id

    return oid_to_raw(object_id(Blob(data=payload)))


def test_refused_by_the_validator_inside_batch_stages_nothing(open_tract: Callable[..., Tract]) -> None:
    t = open_tract()
    t.user("before the batch")
    head = t.head
    refused = {"type": "dialogue", "role": "user", "text": "refused: links a source an append may not"}
    blob, _ = content_objects(refused)
    with t.batch():
        t.user("first in the batch")
        with pytest.raises(InvalidInput, match="refusing to write an invalid commit"):
            t._session.commit_content(blob, operation="append", links={"sources": (head,)})
        t.user("after the refusal")
    assert _blob_key(refused) not in _object_ids(t)
    texts = [m.content for m in t.compile().messages]
    assert texts == ["before the batch", "first in the batch", "after the refusal"]


@pytest.mark.parametrize("kind", ["general", "plain"])
def test_refused_clock_inside_batch_stages_nothing(
    open_tract: Callable[..., Tract], clock: FakeClock, kind: str
) -> None:
    """A commit the clock refuses (past the largest timestamp), on the general path (metadata) and the batch's one-step
    plain append: its blob is staged before the clock is read, and must not be written."""
    t = open_tract()
    t.user("before the batch")
    text = f"refused {kind}: this text is in no other commit"
    with t.batch():
        t.user("first in the batch")
        t.user("second in the batch")  # the next plain append takes the batch's one-step path
        t._session.clock = lambda: 2**53  # past the largest timestamp
        refused = (lambda: t.user(text, metadata={"k": 1})) if kind == "general" else (lambda: t.user(text))
        with pytest.raises(InvalidInput):
            refused()
        t._session.clock = clock
        t.user("after the refusal")
    assert _blob_key({"type": "dialogue", "role": "user", "text": text}) not in _object_ids(t)
    texts = [m.content for m in t.compile().messages]
    assert texts == ["before the batch", "first in the batch", "second in the batch", "after the refusal"]


def test_drop_since_unstages_the_objects_after_the_mark(open_tract: Callable[..., Tract]) -> None:
    """``WriteBatch.mark`` / ``drop_since``: what a refused commit staged after the mark is forgotten, so its
    links are not checked when the batch lands (a dangling one would fail the commits around it)."""
    from tractkv.ids import hash_bytes
    from tractkv.model import Commit, encode

    t = open_tract()
    t.user("kept")
    batch = t.store.new_batch()
    before = batch.put(Blob(data={"type": "dialogue", "role": "user", "text": "staged before"}))
    mark = batch.mark()
    after = batch.put(Blob(data={"type": "dialogue", "role": "user", "text": "staged after"}))
    missing = hash_bytes(encode(Blob(data={"type": "dialogue", "role": "user", "text": "never stored"})))
    batch.put(Commit(parents=(t.head,), content=missing, operation="append", created_at=10**15))
    batch.drop_since(mark)
    assert list(batch.objects) == [before]
    assert after not in batch.objects
    t.store.apply(batch)  # lands: the commit linking a missing blob was dropped with the mark
    assert before in t.store
