"""Hostile but well-formed objects: a receiving store never holds a ref it cannot compile.

Each shape from issue 14 is pushed through path sync and through the in-process hub, and must be refused (a
``RejectedObject`` naming the object and the rule, no ref moved). A hypothesis strategy then builds
well-formed objects with hostile links, timestamps and payloads: each push is refused, or accepted with
compile, log and fsck (store-level and semantic) all working.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tractkv import Tract
from tractkv.engine.history import fsck_objects
from tractkv.errors import RejectedObject
from tractkv.ids import ObjectId, hash_bytes, oid_to_raw
from tractkv.store import MemoryStore, Store, fsck
from tractkv.sync.negotiate import objects_for
from tractkv.sync.path import PathRemote
from tractkv.sync.remote import RefUpdate
from tractkv.view.inspector import Inspector

from .conftest import InProcessHub

MAIN = "refs/heads/main"
EVIL = "refs/heads/evil"
TS = 1_700_000_000_000_000

Pair = tuple[ObjectId, bytes]


def raw(kind: str, **fields: Any) -> Pair:
    """An object's id and canonical bytes, written field by field (so the model's own checks are bypassed)."""
    data = cbor2.dumps({"t": kind, "v": 1, **fields}, canonical=True)
    return ObjectId(hash_bytes(data)), data


def rid(oid: ObjectId) -> bytes:
    return oid_to_raw(oid)


def base() -> tuple[Tract, list[Pair]]:
    """A small valid history (with a tool set) and its objects in sending order."""
    t = Tract(MemoryStore(), clock=iter(range(TS, TS + 10**6, 1000)).__next__)
    t.set_tools([{"name": "lookup", "description": "d", "input_schema": {"type": "object"}}])
    t.system("s")
    t.user("hello")
    assert t.head is not None
    return t, list(objects_for(t.store, [t.head], []))


def message(payload: dict[str, Any]) -> Pair:
    return raw("blob", data=payload)


USER = {"type": "dialogue", "role": "user", "text": "hi"}


def commit(head: ObjectId, content: ObjectId | None, **fields: Any) -> Pair:
    wire: dict[str, Any] = {"op": "append", "ts": TS + 10**7, "parents": [rid(head)], **fields}
    if content is not None:
        wire["content"] = rid(content)
    return raw("commit", **wire)


def shapes() -> dict[str, Callable[[Tract, list[Pair]], tuple[list[Pair], str]]]:
    """name -> build(tract, its objects) -> (the hostile objects, last one the new tip; the rule's words)."""

    def parent_is_blob(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
        blob = message(USER)
        return [blob, commit(blob[0], blob[0])], "parents[0]"

    def tools_is_blob(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
        assert t.head is not None
        blob = message(USER)
        return [blob, commit(t.head, blob[0], tools=rid(blob[0]))], "tools"

    def ts(value: int) -> Callable[[Tract, list[Pair]], tuple[list[Pair], str]]:
        def build(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
            assert t.head is not None
            blob = message(USER)
            return [blob, commit(t.head, blob[0], ts=value)], "ts"

        return build

    def payload(data: dict[str, Any], rule: str) -> Callable[[Tract, list[Pair]], tuple[list[Pair], str]]:
        def build(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
            assert t.head is not None
            blob = message(data)
            return [blob, commit(t.head, blob[0])], rule

        return build

    def annotate_with_dialogue(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
        assert t.head is not None
        blob = message(USER)
        return [blob, commit(t.head, blob[0], op="annotate", target=rid(t.head))], "annotation"

    def merge_with_one_parent(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
        assert t.head is not None
        return [commit(t.head, None, op="merge")], "two or more parents"

    def toolset_of_blobs(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
        assert t.head is not None
        blob = message(USER)
        toolset = raw("toolset", tools=[rid(blob[0])])
        return [blob, toolset, commit(t.head, blob[0], tools=rid(toolset[0]))], "tools[0]"

    def usage_link_to_blob(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
        assert t.head is not None
        blob = message(USER)
        return [blob, commit(t.head, blob[0], links={"usages": [rid(blob[0])]})], "links.usages[0]"

    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24

    def with_image(media_id: ObjectId) -> dict[str, Any]:
        part = {"type": "image", "media_type": "image/png", "media": media_id}
        return {
            "type": "dialogue",
            "role": "user",
            "text": "x",
            "parts": [{"type": "text", "text": "x"}, part],
        }

    def media_not_linked(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
        assert t.head is not None
        image = raw("blob", data=png)
        blob = message(with_image(image[0]))
        return [image, blob, commit(t.head, blob[0])], "links.media"

    def media_link_to_a_message(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
        assert t.head is not None
        other = message(USER)
        blob = message(with_image(other[0]))
        return [other, blob, commit(t.head, blob[0], links={"media": [rid(other[0])]})], "not a media"

    def media_link_not_used(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
        assert t.head is not None
        image = raw("blob", data=png)
        blob = message(USER)
        return [image, blob, commit(t.head, blob[0], links={"media": [rid(image[0])]})], "uses none"

    def declared(
        data: bytes, kind: str, media_type: str
    ) -> Callable[[Tract, list[Pair]], tuple[list[Pair], str]]:
        """A media blob named by a part that declares another media type than its bytes are."""

        def build(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
            assert t.head is not None
            media = raw("blob", data=data)
            part = {"type": kind, "media_type": media_type, "media": media[0]}
            blob = message({"type": "dialogue", "role": "user", "text": "", "parts": [part]})
            links = {"media": [rid(media[0])]}
            return [media, blob, commit(t.head, blob[0], links=links)], f"as {media_type}, but its bytes are"

        return build

    def image_bytes_inline(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
        assert t.head is not None
        part = {"type": "image", "media_type": "image/png", "data": png}
        blob = message({"type": "dialogue", "role": "user", "text": "", "parts": [part]})
        return [blob, commit(t.head, blob[0])], "canonical form"

    def collapse_link(
        target: Callable[[Tract, list[Pair]], tuple[list[Pair], list[bytes]]], rule: str
    ) -> Any:
        """A collapse (an append with ``links.child``) whose link is hostile (spawn / collapse, issue 21)."""

        def build(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
            assert t.head is not None
            extra, linked = target(t, pairs)
            blob = message(USER)
            return [*extra, blob, commit(t.head, blob[0], links={"child": linked})], rule

        return build

    def to_a_blob(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], list[bytes]]:
        blob = message({"type": "dialogue", "role": "user", "text": "not a commit"})
        return [blob], [rid(blob[0])]

    def to_a_missing_commit(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], list[bytes]]:
        return [], [rid(ObjectId(hash_bytes(b"a commit nobody has")))]

    def to_two_commits(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], list[bytes]]:
        assert t.head is not None
        parent = t.log()[1].commit_id
        return [], [rid(t.head), rid(parent)]

    def spawn(**fields: Any) -> Callable[[Tract, list[Pair]], tuple[list[Pair], str]]:
        rule = fields.pop("rule")

        def build(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
            assert t.head is not None
            wire: dict[str, Any] = {"op": "spawn", "ts": TS + 10**7, **fields}
            if wire.get("parents"):
                wire["parents"] = [rid(t.head)]
            if "content" in wire:
                blob = message(USER)
                wire["content"] = rid(blob[0])
                return [blob, raw("commit", **wire)], rule
            return [raw("commit", **wire)], rule

        return build

    record = {"purpose": "p", "branch": "main.spawn/p", "inherit": "none"}

    def parent_link_on_an_append(t: Tract, pairs: list[Pair]) -> tuple[list[Pair], str]:
        assert t.head is not None
        blob = message(USER)
        return [blob, commit(t.head, blob[0], links={"parent": [rid(t.head)]})], "only a spawn commit"

    return {
        "collapse-link-to-a-blob": collapse_link(to_a_blob, "links.child[0]"),
        "collapse-link-to-a-missing-commit": collapse_link(to_a_missing_commit, "neither here nor earlier"),
        "collapse-link-to-two-commits": collapse_link(to_two_commits, "links.child names exactly one commit"),
        "spawn-with-content": spawn(content=True, meta={"spawn": record}, rule="no content"),
        "spawn-without-a-record": spawn(rule="metadata.spawn"),
        "spawn-with-a-bad-inherit": spawn(meta={"spawn": {**record, "inherit": "all"}}, rule="inherit"),
        "snapshot-spawn-with-a-parent": spawn(
            meta={"spawn": record}, parents=True, rule="a full spawn's parent"
        ),
        "parent-link-on-an-append": parent_link_on_an_append,
        "media-not-linked": media_not_linked,
        "media-link-to-a-message": media_link_to_a_message,
        "media-link-not-used": media_link_not_used,
        "image-bytes-inline": image_bytes_inline,
        "png-declared-as-jpeg": declared(png, "image", "image/jpeg"),
        "png-declared-as-pdf": declared(png, "document", "application/pdf"),
        "invalid-utf8-declared-as-text": declared(b"\xff\xfe not utf-8", "document", "text/plain"),
        "part-type-a-list": payload(
            {"type": "dialogue", "role": "user", "text": "a", "parts": [{"type": ["image"]}, "a"]},
            "part type must be a string",
        ),
        "part-type-a-dict": payload(
            {"type": "dialogue", "role": "user", "text": "", "parts": [{"type": {"a": 1}}]},
            "part type must be a string",
        ),
        "parent-is-a-blob": parent_is_blob,
        "tools-is-a-blob": tools_is_blob,
        "ts-2**64-1": ts(2**64 - 1),
        "ts--2**63": ts(-(2**63)),
        "ts-a-bool": ts(True),  # type: ignore[arg-type]
        "tool_calls-a-string": payload(
            {"type": "dialogue", "role": "assistant", "text": "x", "tool_calls": "call it"}, "tool_calls"
        ),
        "artifact-without-fields": payload({"type": "artifact"}, "artifact"),
        "freeform-bytes": payload({"type": "freeform", "payload": b"\x00", "role": "user"}, "bytes"),
        "not-a-message": payload({"hello": "world"}, "not a"),
        "annotate-with-a-dialogue": annotate_with_dialogue,
        "merge-with-one-parent": merge_with_one_parent,
        "toolset-of-blobs": toolset_of_blobs,
        "usage-link-to-a-blob": usage_link_to_blob,
    }


SHAPES = shapes()


def push(target: Callable[[], Any], pairs: list[Pair], tip: ObjectId) -> None:
    with target() as remote:
        remote.push(pairs, [RefUpdate(EVIL, None, tip)])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_shape_is_refused_by_path_sync(name: str) -> None:
    t, pairs = base()
    hostile, rule = SHAPES[name](t, pairs)
    target = MemoryStore()
    with pytest.raises(RejectedObject) as info:
        push(lambda: PathRemote("memory", store=target), [*pairs, *hostile], hostile[-1][0])
    assert info.value.status == 422
    assert info.value.oid in {oid for oid, _ in hostile}  # names the object...
    assert rule in str(info.value)  # ...and the rule
    assert dict(target.iter_refs("refs/")) == {}
    assert fsck(target).ok
    assert fsck_objects(target) == ()


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_shape_is_refused_by_the_hub_with_a_422(
    name: str, in_process_hub: Callable[..., InProcessHub]
) -> None:
    hub = in_process_hub()
    t, pairs = base()
    hostile, rule = SHAPES[name](t, pairs)
    with pytest.raises(RejectedObject) as info:
        push(hub.remote, [*pairs, *hostile], hostile[-1][0])
    assert info.value.status == 422
    assert info.value.oid in {oid for oid, _ in hostile}
    assert rule in str(info.value)
    assert hub.state()[0] == {}
    assert fsck_objects(hub.store) == ()


def test_a_valid_history_still_passes_and_compiles(in_process_hub: Callable[..., InProcessHub]) -> None:
    t, pairs = base()
    t.annotate("HEAD", "pinned", reason="keep")
    with t.batch():
        t.commit({"type": "freeform", "payload": {"k": [1, 2.5, None]}})
        t.assistant("", tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"q": "x"}}])
    assert t.head is not None
    pairs = list(objects_for(t.store, [t.head], []))
    hub = in_process_hub()
    push(hub.remote, pairs, t.head)
    with Tract(hub.store, branch="evil", owns_store=False, readonly=True) as clone:
        assert clone.compile().to_dicts() == t.compile().to_dicts()


def test_fsck_reports_a_stored_commit_with_a_missing_media_link() -> None:
    t, pairs = base()
    hostile, _ = SHAPES["media-not-linked"](t, pairs)
    store = MemoryStore()
    batch = store.new_batch()
    for oid, data in [*pairs, *hostile]:
        batch.put_raw(oid, data)
    store.apply(batch)
    problems = fsck_objects(store)
    assert [p.where for p in problems] == [hostile[-1][0]]
    assert "links.media" in problems[0].detail


@pytest.mark.parametrize(
    "name",
    [
        "png-declared-as-jpeg",
        "png-declared-as-pdf",
        "invalid-utf8-declared-as-text",
        "part-type-a-list",
        "part-type-a-dict",
    ],
)
def test_fsck_reports_a_stored_media_part_or_part_type_that_breaks_the_rules(name: str) -> None:
    t, pairs = base()
    hostile, rule = SHAPES[name](t, pairs)
    store = MemoryStore()
    batch = store.new_batch()
    for oid, data in [*pairs, *hostile]:
        batch.put_raw(oid, data)
    store.apply(batch)
    problems = fsck_objects(store)  # never crashes on a hostile blob
    assert [p.where for p in problems] == [hostile[-1][0]]
    assert rule in problems[0].detail


def test_a_tag_never_raises_on_a_hostile_blob(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any unexpected failure while checking a blob makes it an invalid tag, not a crash."""
    from tractkv.engine.history import validate
    from tractkv.model import Blob

    def boom(data: object) -> object:
        raise TypeError("unhashable type: 'list'")

    monkeypatch.setattr(validate, "canonical_payload", boom)
    # a name: not the plain-text shape, whose tag needs no canonical_payload (tests/sync/test_receive_shapes.py)
    found = validate.tag(Blob(data={"type": "dialogue", "role": "user", "text": "x", "name": "n"}))
    assert found.startswith(validate.INVALID)
    assert "TypeError" in found


# --- hypothesis: well-formed, semantically hostile objects ---------------------------------------------

MESSAGES = [
    USER,
    {"type": "instruction", "text": "s"},
    {"type": "reasoning", "text": "because"},
    {"type": "dialogue", "role": "tool", "text": "r", "tool_call_id": "c1"},
    {
        "type": "dialogue",
        "role": "assistant",
        "text": "",
        "tool_calls": [{"id": "c1", "name": "n", "arguments": {}}],
    },
    {"type": "artifact", "text": "t", "artifact_type": "code", "role": "user"},
    {"type": "freeform", "payload": {"a": [1, 2.5, None]}, "role": "assistant"},
]
BOOKKEEPING = {
    "annotate": [{"type": "annotation", "priority": p} for p in ("normal", "pinned", "skip")],
    "merge": [{"type": "merge", "strategy": s, "source": "x", "conflicts": 0} for s in ("ours", "theirs")],
}
HOSTILE = [
    {"type": "dialogue", "role": "assistant", "text": "", "tool_calls": []},
    {"type": "dialogue", "role": "tool", "text": "r"},
    {"type": "dialogue", "role": "user", "text": None},
    {"type": "dialogue", "role": "user", "text": "x", "tool_calls": [{"id": "a", "name": "n"}]},
    {
        "type": "dialogue",
        "role": "assistant",
        "text": "",
        "tool_calls": [{"id": "a", "name": "n", "arguments": "{}"}],
    },
    {"type": "artifact", "text": "t"},
    {"type": "freeform", "payload": [b"x"], "role": "user"},
    {"type": "freeform", "role": "user"},
    {"type": "reasoning", "text": 3},
    {"type": "annotation", "priority": "never"},
    {"type": "merge", "strategy": "mine", "source": "x", "conflicts": -1},
    {"type": "tool_original", "text": "raw"},
    {"type": "mystery"},
    {"text": "untyped"},
    "a string",
    7,
    None,
]
VALID_TS = st.integers(min_value=0, max_value=2**53 - 1)
HOSTILE_TS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1), st.sampled_from([-1, 2**53, 2**64 - 1])
)
OPS = ["append", "edit", "annotate", "merge", "compress"]
HOSTILE_OPS = ["rebase", "", "Append"]
LINK_NAMES = st.sampled_from(["sources", "original", "usages", "future"])


@st.composite
def hostile_push(draw: st.DrawFn) -> tuple[list[Pair], ObjectId]:
    """A valid history plus 1-4 layers, each a blob, maybe a tool set or usage record, and a commit. Every
    choice is usually sensible and sometimes hostile (a link to an object of any kind, a timestamp out of
    range, a malformed payload, an unknown operation), so that both outcomes happen often."""
    t, pairs = base()
    assert t.head is not None
    pools: dict[str, list[ObjectId]] = {"any": [], "commit": [], "tool": [], "toolset": [], "usage": []}
    for oid, _ in pairs:
        kind = t.store[oid].KIND
        pools["any"].append(oid)
        pools.setdefault(kind, []).append(oid)
    sent = list(pairs)
    tip = t.head

    def hostile() -> bool:
        return draw(st.integers(0, 9)) == 0  # one choice in ten is hostile

    def pick(kind: str) -> ObjectId:
        pool = pools.get(kind) or []
        return draw(st.sampled_from(pool if pool and not hostile() else pools["any"]))

    def add(pair: Pair, kind: str) -> Pair:
        sent.append(pair)
        pools["any"].append(pair[0])
        pools.setdefault(kind, []).append(pair[0])
        return pair

    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(HOSTILE_OPS if hostile() else OPS))
        payloads = BOOKKEEPING.get(op, MESSAGES)
        blob = add(message(draw(st.sampled_from(HOSTILE if hostile() else payloads))), "blob")
        ts = draw(HOSTILE_TS if hostile() else VALID_TS)
        wire: dict[str, Any] = {"op": op, "ts": ts, "content": rid(blob[0])}
        parents = [tip, pick("commit")] if op == "merge" else [tip]
        if hostile():
            parents = [pick("commit") for _ in range(draw(st.integers(0, 2)))]
        if parents:
            wire["parents"] = [rid(p) for p in parents]
        if op in ("edit", "annotate"):
            wire["target"] = rid(pick("commit"))
        if op == "compress":
            wire["links"] = {"sources": [rid(pick("commit"))]}
        elif hostile():
            wire["links"] = {draw(LINK_NAMES): [rid(pick("any"))]}
        if draw(st.booleans()):
            toolset = add(
                raw("toolset", tools=[rid(pick("tool")) for _ in range(draw(st.integers(0, 2)))]), "toolset"
            )
            wire["tools"] = rid(toolset[0] if not hostile() else pick("any"))
        if draw(st.booleans()):
            usage: dict[str, Any] = {"id": "u", "tool": "n", "status": "success", "start": ts}
            usage["commit"] = rid(pick("commit"))
            if draw(st.booleans()):
                usage["children"] = [rid(pick("usage"))]
            record = add(raw("usage", **usage), "usage")
            wire["links"] = {**wire.get("links", {}), "usages": [rid(record[0])]}
        if op not in ("edit", "annotate") and hostile():
            wire["reply_to"] = rid(pick("commit"))
        tip = add(raw("commit", **wire), "commit")[0]
    return sent, tip


def check_usable(store: Store, branch: str) -> None:
    """What a reader does with an accepted branch: compile, log, the viewer's pages (their data), fsck
    (store-level and semantic)."""
    with Tract(store, branch=branch, owns_store=False, readonly=True) as t:
        t.compile()
        t.compile(include_reasoning=True)
        log = t.log()
    inspector = Inspector(store)
    ref = f"refs/heads/{branch}"
    inspector.branches()
    inspector.graph_page(ref)
    inspector.usages(ref)
    for info in log:
        inspector.commit(info.commit_id, ref)
    report = fsck(store)
    assert report.ok, report.problems
    assert fsck_objects(store) == ()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_push())
def test_hostile_pushes_are_refused_or_harmless(push_data: tuple[list[Pair], ObjectId]) -> None:
    pairs, tip = push_data
    target = MemoryStore()
    refused: RejectedObject | None = None
    try:
        push(lambda: PathRemote("memory", store=target), pairs, tip)
    except RejectedObject as exc:
        refused = exc
    if refused is not None:
        assert refused.oid in {oid for oid, _ in pairs}  # named
        assert dict(target.iter_refs("refs/")) == {}  # no ref moved
        assert fsck_objects(target) == ()  # nothing invalid was kept
    elif target.get_ref(EVIL) is not None:
        check_usable(target, "evil")


@pytest.mark.parametrize("bad", ["blob", "name"])
def test_fetch_and_clone_refuse_a_branch_that_names_no_commit_or_has_a_bad_name(
    tmp_path: Path, bad: str
) -> None:
    from tractkv import Tract
    from tractkv.errors import TransferError
    from tractkv.model import Blob
    from tractkv.store import LmdbStore

    source = str(tmp_path / "source")
    with Tract.open(source, durable=False) as t:
        head = t.user("hi").commit_id
    with LmdbStore(source) as store:
        if bad == "blob":
            store.set_ref(
                "refs/heads/odd", store.put(Blob(data={"type": "dialogue", "role": "user", "text": "x"}))
            )
        else:
            store.set_ref("refs/heads/bad\nname", head)
    with Tract.open(str(tmp_path / "local"), durable=False) as local:
        local.remote_add("origin", source)
        with pytest.raises(TransferError):
            local.fetch()
        assert local.list_branches() == [b for b in local.list_branches() if not b.is_remote]
    target = tmp_path / "clone"
    with pytest.raises(TransferError):
        Tract.clone(source, str(target))
    assert not target.exists()
