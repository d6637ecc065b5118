"""One size limit on every path (issue 17, item 4): an object's encoded bytes are at most MAX_OBJECT_BYTES (16 MiB).
A store writes nothing larger; ``bundle create`` and push refuse to send anything larger (naming the object and
the limit, before anything is written or sent); a default hub, fetch and ``bundle unbundle`` read anything up to
it. So what a default store can write, every default path carries and reads. Larger objects exist only in a
store that received them under a raised limit (or from an older tractkv, which had no limit at write): both
ends then need the option (``bundle create / unbundle --max-object-bytes``, ``serve --max-object-bytes``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tractkv import Tract
from tractkv.errors import ContentError, ContentTooLarge
from tractkv.model import MAX_OBJECT_BYTES, Blob, Commit, encode_with_id
from tractkv.store import LmdbStore

from .conftest import Hub
from .test_cli_sync import messages, tkv
from .test_http_hub import hub_state

MAIN = "refs/heads/main"
MIB = 1024 * 1024
HUB_DEFAULT = f"{MAX_OBJECT_BYTES:,}-byte"


def state(path: Path) -> tuple[dict[str, str], int]:
    with LmdbStore(str(path), create=False, durable=False) as st:
        return dict(st.iter_refs()), st.count_objects()


def tkv_in(store: Path, *args: str, data: bytes) -> tuple[int, str]:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "tractkv", "--store", str(store), *args],
        input=data,
        capture_output=True,
        timeout=120,
        check=False,
        env=dict(os.environ),
    )
    return out.returncode, out.stderr.decode()


def store_with_a_large_message(path: Path, size: int) -> tuple[str, int]:
    """A store holding one message of ``size`` bytes on main, written as an older tractkv (no limit at write)
    or a raised-limit receive would have left it: objects staged raw, past the write path's check."""
    with Tract.open(str(path), durable=False) as t:
        t.system("big ahead")
        parent = t.head
        assert parent is not None
        store = t.store
        blob_id, blob = encode_with_id(Blob(data={"type": "dialogue", "role": "user", "text": "x" * size}))
        commit = Commit(
            parents=(parent,), content=blob_id, created_at=t.store.get_commit(parent).created_at + 1
        )
        commit_id, commit_bytes = encode_with_id(commit)
        batch = store.new_batch()
        batch.put_raw(blob_id, blob)
        batch.put_raw(commit_id, commit_bytes)
        batch.set_ref(MAIN, commit_id, expected=parent)
        store.apply(batch)
        return blob_id, len(blob)


def test_commit_over_the_limit_is_refused_naming_size_and_limit(tmp_path: Path) -> None:
    a = tmp_path / "a"
    tkv(a, "init")
    tkv(a, "commit", "before")
    before = state(a)
    code, err = tkv_in(a, "commit", "-", data=b"x" * (17 * MIB))
    assert code == 1
    assert len(err.splitlines()) == 1
    assert "Error: a blob of 17,825,8" in err
    assert f"over the {HUB_DEFAULT} (16.0 MiB) limit on one object" in err
    assert "nothing was written" in err
    assert state(a) == before


def test_what_a_default_store_writes_every_default_path_carries(
    tmp_path: Path, start_hub: Callable[..., Hub]
) -> None:
    """A message just under the limit: committed, pushed to a default hub, cloned back, bundled and unbundled."""
    a = tmp_path / "a"
    tkv(a, "init")
    text = b"y" * (MAX_OBJECT_BYTES - 200)
    code, err = tkv_in(a, "commit", "-", data=text)
    assert code == 0, err
    hub = start_hub()
    tkv(a, "remote", "add", "origin", hub.url)
    tkv(a, "push", "-q")
    tkv(tmp_path, "clone", hub.url, str(tmp_path / "b"))
    assert [len(m) for m in messages(tmp_path / "b")] == [len(text)]
    tkv(a, "bundle", "create", str(tmp_path / "all.tkvbundle"))
    tkv(tmp_path / "b", "bundle", "unbundle", str(tmp_path / "all.tkvbundle"))


def test_bundle_create_refuses_what_a_default_unbundle_cannot_read(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    big, size = store_with_a_large_message(a, 17 * MIB)
    bundle = tmp_path / "big.tkvbundle"
    out = tkv(a, "bundle", "create", str(bundle), ok=False)
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        f"Error: transfer rejected: a blob of {size:,} bytes is over the {HUB_DEFAULT} limit on one "
        f"object a default unbundle reads: no bundle was written (object {big})"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]  # no bundle, no temp file

    # Written under a raised limit, it needs the same option to be read.
    tkv(a, "bundle", "create", str(bundle), "--max-object-bytes", str(32 * MIB))
    tkv(b, "init")
    before = state(b)
    out = tkv(b, "bundle", "unbundle", str(bundle), ok=False)
    assert out.returncode == 1
    assert len(out.stderr.splitlines()) == 1
    assert f"over the {MAX_OBJECT_BYTES}-byte limit" in out.stderr
    assert "bundle unbundle --max-object-bytes N" in out.stderr
    assert state(b)[0] == before[0]  # no ref moved
    out = tkv(b, "bundle", "unbundle", str(bundle), "--max-object-bytes", str(32 * MIB))
    assert out.stdout.startswith("bundle/main ")
    with LmdbStore(str(b), create=False) as st:
        assert st.has(big)


def test_push_refuses_an_object_over_the_hubs_limit_before_sending_anything(
    tmp_path: Path, start_hub: Callable[..., Hub]
) -> None:
    a = tmp_path / "a"
    big, size = store_with_a_large_message(a, 17 * MIB)
    hub = start_hub()
    tkv(a, "remote", "add", "origin", hub.url)
    before = state(a)
    out = tkv(a, "push", ok=False)
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        f"Error: transfer rejected: a blob of {size:,} bytes is over {hub.url}'s {HUB_DEFAULT} limit "
        f"on one object: nothing was sent (object {big})"
    ]
    assert hub_state(hub) == ({}, 0)  # nothing sent: not even the objects before it in the stream
    assert state(a) == before
    # A hub that raised its limit takes it.
    raised = start_hub("--max-object-bytes", str(32 * MIB))
    tkv(a, "remote", "add", "raised", raised.url)
    assert json.loads(tkv(a, "push", "raised", "--json").stdout)["results"][0]["ok"] is True
    assert hub_state(raised)[0] == {MAIN: state(a)[0][MAIN]}


def test_push_refuses_a_push_over_the_hubs_request_limit_before_sending_anything(
    tmp_path: Path, start_hub: Callable[..., Hub]
) -> None:
    a = tmp_path / "a"
    tkv(a, "init")
    for i in range(4):
        tkv(a, "commit", f"{i} " + "z" * 40_000)
    hub = start_hub("--max-request-bytes", "100000")
    tkv(a, "remote", "add", "origin", hub.url)
    out = tkv(a, "push", ok=False)
    assert out.returncode == 1
    assert len(out.stderr.splitlines()) == 1
    assert "100,000-byte limit on one push: nothing was sent" in out.stderr
    assert hub_state(hub) == ({}, 0)


def test_tool_results_and_media_are_held_to_the_same_limit(tmp_path: Path) -> None:
    with Tract.open(str(tmp_path / "t"), durable=False) as t:
        t.user("run it")
        t.assistant("", tool_calls=[{"id": "c1", "name": "dump", "arguments": {}}])
        head, count = t.head, t.store.count_objects()
        with pytest.raises(ContentTooLarge) as info:
            t.tool_result("c1", "dump", "r" * (17 * MIB))
        assert (info.value.kind, info.value.limit) == ("blob", MAX_OBJECT_BYTES)
        assert info.value.size > 17 * MIB
        assert (t.head, t.store.count_objects()) == (head, count)
        document = {"type": "document", "data": b"d" * (MAX_OBJECT_BYTES - 10), "media_type": "text/plain"}
        with pytest.raises(ContentError, match="one stored object holds"):
            t.tool_result("c1", "dump", ["see the file", document])
        assert (t.head, t.store.count_objects()) == (head, count)
        assert t.tool_result("c1", "dump", "small") is not None
