"""Tags on the hub (issue 34 item 1): a token's scopes apply to tag refs (``write:<glob>`` matches
``tags/<name>``), what a token may see is what it lists and fetches, and a hostile tag object is refused on
receive as a hostile commit is."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tractkv import Tract
from tractkv.errors import AuthError, PushRejected, RejectedObject
from tractkv.ids import ObjectId
from tractkv.model import Tag, encode, object_id
from tractkv.store import MemoryStore
from tractkv.sync import transfer
from tractkv.sync.auth import Grant, TokenTable
from tractkv.sync.negotiate import objects_for
from tractkv.sync.path import PathRemote
from tractkv.sync.remote import RefUpdate

from .conftest import ADMIN, EDGE, READER, InProcessHub

TAGGER = "tagger-token-0123456789abcdef"
TAGS = "refs/tags/"
Factory = Callable[..., Tract]


def test_write_globs_match_tags_as_tags_slash_name() -> None:
    edge = Grant(scopes=("write:agents/edge-7/*",))
    tagger = Grant(scopes=("write:tags/v*",))
    everything = Grant(scopes=("write:*",))
    assert not edge.may_write("refs/tags/v1")
    assert edge.may_write("refs/heads/agents/edge-7/run")
    assert tagger.may_write("refs/tags/v1")
    assert not tagger.may_write("refs/tags/beta")
    assert tagger.may_see("refs/tags/v9")
    assert not edge.may_see("refs/tags/v1")
    assert everything.may_write("refs/tags/anything")


def test_hub_scopes_apply_to_tags(
    in_process_hub: Callable[..., InProcessHub], open_store_tract: Factory
) -> None:
    tokens = TokenTable(
        {ADMIN: ["admin"], READER: ["read"], EDGE: ["write:agents/edge-7/*"], TAGGER: ["write:tags/v*"]}
    )
    hub = in_process_hub(tokens=tokens)
    a = open_store_tract("a")
    a.user("one")
    a.tag("v1", message="first")
    a.tag("beta")
    with hub.remote(ADMIN) as admin:
        transfer.push_to(a.store, admin, "hub", "refs/heads/main")
        transfer.push_tags_to(a.store, admin)
    with hub.remote(READER) as reader:
        assert set(reader.list_refs(TAGS)) == {TAGS + "v1", TAGS + "beta"}
    with hub.remote(EDGE) as edge:
        assert edge.list_refs(TAGS) == {}  # a write-only token sees only what it may write
    with hub.remote(TAGGER) as tagger:
        assert set(tagger.list_refs(TAGS)) == {TAGS + "v1"}
    a.user("two")
    a.tag("v2")
    a.tag("beta2")
    with hub.remote(EDGE) as edge, pytest.raises((AuthError, PushRejected)) as info:
        transfer.push_tags_to(a.store, edge)
    assert "forbidden" in str(info.value)
    assert set(hub.state()[0]) == {"refs/heads/main", TAGS + "v1", TAGS + "beta"}
    b = open_store_tract("b")
    b.user("the tagger's own")
    b.tag("v3")
    with hub.remote(TAGGER) as tagger:
        assert transfer.push_tags_to(b.store, tagger).ok
    b.tag("beta3")
    with hub.remote(TAGGER) as tagger, pytest.raises((AuthError, PushRejected)):
        transfer.push_tags_to(b.store, tagger)
    assert TAGS + "beta3" not in hub.state()[0]
    assert TAGS + "v3" in hub.state()[0]


def _closure(t: Tract) -> list[tuple[ObjectId, bytes]]:
    assert t.head is not None
    return list(objects_for(t.store, [ObjectId(t.head)], []))


@pytest.mark.parametrize(
    ("shape", "rule"),
    [("blob-target", "target"), ("bad-name", "name"), ("future", "a clock may be ahead")],
)
def test_a_hostile_tag_object_is_refused_by_path_and_hub(
    shape: str, rule: str, in_process_hub: Callable[..., InProcessHub]
) -> None:
    t = Tract(MemoryStore())
    t.user("one")
    info = t.get_commit("HEAD")
    target = info.content_id if shape == "blob-target" else info.commit_id
    assert target is not None
    when = 2**52 if shape == "future" else 1
    tag = Tag(target=target, name="a..b" if shape == "bad-name" else "v1", created_at=when)
    pairs = [*_closure(t), (object_id(tag), encode(tag))]
    update = [RefUpdate(TAGS + "v1", None, object_id(tag))]
    target_store = MemoryStore()
    with pytest.raises(RejectedObject, match=rule):
        PathRemote("memory", store=target_store).push(pairs, update)
    assert dict(target_store.iter_refs(TAGS)) == {}
    hub = in_process_hub()
    with hub.remote() as remote, pytest.raises(RejectedObject, match=rule) as raised:
        remote.push(pairs, update)
    assert raised.value.status == 422
    assert not any(ref.startswith(TAGS) for ref in hub.state()[0])


def test_a_tag_ref_must_name_a_commit_or_a_tag_of_one(in_process_hub: Callable[..., InProcessHub]) -> None:
    t = Tract(MemoryStore())
    t.user("one")
    blob = t.get_commit("HEAD").content_id
    assert blob is not None
    hub = in_process_hub()
    with hub.remote() as remote:
        outcome = remote.push(_closure(t), [RefUpdate(TAGS + "v1", None, ObjectId(blob))])
    assert [(r.ok, r.reason) for r in outcome.results] == [(False, "invalid")]
