"""``fetch`` / ``pull`` / ``clone --max-object-bytes N`` (``max_object=N``), as ``bundle unbundle`` and ``serve``
have it: the largest object the fetch takes, 16 MiB by default, on every transport (a path remote too, which
before took anything). An object over it is refused in one ``Error:`` line, exit 1, and no branch moves (a clone
leaves no store behind); raising the limit takes what a hub serving under a raised limit holds."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tractkv import Tract
from tractkv.errors import InvalidInput, ObjectTooLarge
from tractkv.model import MAX_OBJECT_BYTES
from tractkv.store import LmdbStore
from tractkv.sync.path import PathRemote
from tractkv.sync.transfer import fetch_from

from .conftest import Hub
from .test_cli_sync import messages, tkv
from .test_size_limits import MIB, store_with_a_large_message

MAIN = "refs/heads/main"
TEXT = "x" * 5_000  # one message blob of about 5 KB


def refs(store: Path) -> dict[str, str]:
    with LmdbStore(str(store), create=False, durable=False) as st:
        return dict(st.iter_refs())


def origin_and_copy(tmp_path: Path) -> tuple[Path, Path]:
    """``a`` with a small history, cloned as ``b``; then ``a`` commits one 5 KB message."""
    a, b = tmp_path / "a", tmp_path / "b"
    tkv(a, "init")
    tkv(a, "commit", "hello")
    tkv(tmp_path, "clone", str(a), str(b))
    tkv(a, "commit", TEXT)
    return a, b


def assert_refused(out: subprocess.CompletedProcess[str], limit: int) -> str:
    assert out.returncode == 1
    assert out.stdout == ""
    err = out.stderr
    assert len(err.splitlines()) == 1, err
    assert err.startswith("Error: transfer rejected: object of ")
    assert f"bytes is over the {limit}-byte limit on one object a fetch takes: no branch moved" in err
    assert "--max-object-bytes N, max_object=N" in err
    return err


@pytest.mark.parametrize("command", ["fetch", "pull"])
def test_fetch_and_pull_refuse_an_object_over_the_limit_and_move_no_branch(
    tmp_path: Path, command: str
) -> None:
    a, b = origin_and_copy(tmp_path)
    before = refs(b)
    assert_refused(tkv(b, command, "--max-object-bytes", "1000", ok=False), 1000)
    assert refs(b) == before  # neither the tracking branch nor main
    tkv(b, command, "-q", "--max-object-bytes", "10000")  # raised above the message: taken
    if command == "pull":
        assert messages(b) == ["hello", TEXT]
    assert refs(b)["refs/remotes/origin/main"] == refs(a)[MAIN]


def test_clone_refuses_an_object_over_the_limit_and_leaves_no_store(tmp_path: Path) -> None:
    a, _ = origin_and_copy(tmp_path)
    target = tmp_path / "c"
    assert_refused(tkv(tmp_path, "clone", str(a), str(target), "--max-object-bytes", "1000", ok=False), 1000)
    assert not target.exists()
    tkv(tmp_path, "clone", str(a), str(target), "--max-object-bytes", "10000")
    assert messages(target) == ["hello", TEXT]


def test_the_python_api_takes_max_object_and_refuses_a_bad_one(tmp_path: Path) -> None:
    a, b = origin_and_copy(tmp_path)
    before = refs(b)
    with Tract.open(str(b), durable=False) as t:
        for bad in (0, -1, True, "1000", 1.5):
            with pytest.raises(InvalidInput, match=r"max_object \(--max-object-bytes\) is a positive number"):
                t.fetch("origin", max_object=bad)  # type: ignore[arg-type]
        with pytest.raises(ObjectTooLarge, match="over the 1000-byte limit"):
            t.pull("origin", max_object=1000)
        assert dict(t.store.iter_refs()) == before
        assert t.pull("origin", max_object=10_000).kind == "fast-forward"
    with pytest.raises(InvalidInput):
        Tract.clone(str(a), str(tmp_path / "c"), max_object=0)
    assert not (tmp_path / "c").exists()
    assert tkv(b, "fetch", "--max-object-bytes", "0", ok=False).returncode == 2  # a usage error, as for serve


def test_a_hub_under_a_raised_limit_is_fetched_and_cloned_with_the_same_option(
    tmp_path: Path, start_hub: Callable[..., Hub]
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    big, size = store_with_a_large_message(a, 17 * MIB)
    hub = start_hub("--max-object-bytes", str(32 * MIB))
    tkv(a, "remote", "add", "origin", hub.url)
    tkv(a, "push", "-q")

    out = tkv(tmp_path, "clone", hub.url, str(b), ok=False)  # the default limit: refused, no store left
    err = assert_refused(out, MAX_OBJECT_BYTES)
    assert f"object of {size} bytes" in err
    assert big in err
    assert not b.exists()
    tkv(tmp_path, "clone", hub.url, str(b), "--max-object-bytes", str(32 * MIB))
    assert refs(b)[MAIN] == refs(a)[MAIN]

    c = tmp_path / "c"
    tkv(c, "init")
    tkv(c, "remote", "add", "origin", hub.url)
    assert_refused(tkv(c, "fetch", ok=False), MAX_OBJECT_BYTES)
    assert "refs/remotes/origin/main" not in refs(c)
    tkv(c, "pull", "-q", "--max-object-bytes", str(32 * MIB))
    assert refs(c)[MAIN] == refs(a)[MAIN]


def test_a_raised_limit_holds_for_its_fetch_only(tmp_path: Path) -> None:
    # A Remote kept across fetches: max_object raises the limit for the one fetch that passes it.
    a, b = origin_and_copy(tmp_path)
    remote = PathRemote(str(a))
    try:
        with LmdbStore(str(b), durable=False) as store:
            with pytest.raises(ObjectTooLarge):
                fetch_from(store, remote, "origin", max_object=1_000)
            assert remote.max_receive == MAX_OBJECT_BYTES
            assert fetch_from(store, remote, "origin", max_object=10_000).updated
            assert remote.max_receive == MAX_OBJECT_BYTES
    finally:
        remote.close()
