"""A remote that is another store on this machine (a directory path or a ``file://`` URL)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from urllib.parse import unquote, urlparse

from tractkv.errors import RemoteUnavailable, StoreError, UnsupportedURL
from tractkv.ids import ObjectId, is_object_id
from tractkv.store import LmdbStore, Store

from .negotiate import objects_for
from .receive import Receiver, apply_ref_updates, missing_ids
from .remote import PushOutcome, RefUpdate, Remote


def path_of(url: str) -> str:
    """The filesystem path a path or ``file://`` URL names."""
    if url.startswith("file://"):
        parsed = urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            raise UnsupportedURL(url, "file:// URLs name this machine only (file:///path)")
        return unquote(parsed.path)
    if "://" in url:
        raise UnsupportedURL(url, "not a path")
    return url


class PathRemote(Remote):
    """Another LMDB store, opened in this process (shares the environment if it is open already)."""

    def __init__(self, url: str, *, store: Store | None = None) -> None:
        self.url = url
        if store is not None:
            self.store = store
            self._owns = False
            return
        try:
            self.store = LmdbStore(path_of(url), create=False)
        except StoreError as exc:
            raise RemoteUnavailable(f"cannot open the store at {url}: {exc}") from exc
        self._owns = True

    def list_refs(self, prefix: str = "refs/heads/") -> dict[str, ObjectId]:
        return {n: ObjectId(v) for n, v in self.store.iter_refs(prefix) if is_object_id(v)}

    def missing(self, oids: Sequence[ObjectId]) -> set[ObjectId]:
        return missing_ids(self.store, oids)

    def push(
        self,
        objects: Iterable[tuple[ObjectId, bytes]],
        updates: Sequence[RefUpdate],
        *,
        atomic: bool = False,
    ) -> PushOutcome:
        receiver = Receiver(self.store)
        stats = receiver.receive(objects)
        results = apply_ref_updates(self.store, updates, atomic=atomic, received=receiver)
        return PushOutcome(results=tuple(results), objects_sent=stats.objects, bytes_sent=stats.bytes)

    def fetch(
        self,
        wants: Sequence[ObjectId],
        haves: Sequence[ObjectId],
        known: Callable[[ObjectId], bool] | None = None,
    ) -> Iterator[tuple[ObjectId, bytes]]:
        return objects_for(self.store, wants, haves)

    def close(self) -> None:
        if self._owns:
            self.store.close()
