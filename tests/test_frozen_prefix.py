"""FrozenPrefix: the O(1) sequences compile() returns must behave exactly like the tuples they replace."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given

from tractkv import Tract
from tractkv.engine.values import FrozenPrefix


@given(
    items=st.lists(st.integers(), max_size=20),
    extra=st.lists(st.integers(), max_size=5),
    index=st.integers(-25, 25),
    start=st.none() | st.integers(-25, 25),
    stop=st.none() | st.integers(-25, 25),
    step=st.none() | st.integers(-3, 3).filter(bool),
)
def test_behaves_like_the_tuple_it_replaces(
    items: list[int], extra: list[int], index: int, start: int | None, stop: int | None, step: int | None
) -> None:
    backing = list(items)
    prefix = FrozenPrefix(backing)
    backing.extend(extra)  # later appends must not show through
    expected = tuple(items)
    assert len(prefix) == len(expected)
    assert tuple(prefix) == expected
    assert list(reversed(prefix)) == list(reversed(expected))
    assert prefix == expected
    assert expected == prefix
    assert prefix == list(expected)
    assert hash(prefix) == hash(expected)
    assert repr(prefix) == repr(expected)
    assert prefix[start:stop:step] == expected[start:stop:step]
    if -len(expected) <= index < len(expected):
        assert prefix[index] == expected[index]
    else:
        with pytest.raises(IndexError):
            prefix[index]
    if extra:
        assert prefix != tuple(backing)
    assert (prefix == "not a sequence") is False


def test_a_compiled_context_never_changes_after_later_appends() -> None:
    with Tract.open() as t:
        t.user("one")
        t.assistant("two")
        before = t.compile()
        contents = [m.content for m in before.messages]
        hashes = tuple(before.commit_ids)
        t.user("three")
        t.commit(
            {"type": "dialogue", "role": "user", "text": "THREE"},
            operation="edit",
            edit_target=t.log()[0].commit_id,
        )
        after = t.compile()
    assert [m.content for m in before.messages] == contents == ["one", "two"]
    assert tuple(before.commit_ids) == hashes
    assert len(before.generation_configs) == 2
    assert [m.content for m in after.messages] == ["one", "two", "THREE"]
    assert after.messages[:2] == before.messages
