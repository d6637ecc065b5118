"""The interface every transport implements, and the values that cross it.

A transport moves three things: the other side's refs (``list_refs``), objects (``missing`` / ``push`` one
way, ``fetch`` the other), and compare-and-swap ref updates (carried by ``push``, applied in one transaction
on the receiving side). The logic that decides *what* to send lives in :mod:`tractkv.sync.negotiate` and
:mod:`tractkv.sync.transfer`, so every transport (path, HTTP hub, S3, bundle) behaves the same.

Ref names on the wire are full names (``refs/heads/main``); values are hex object ids.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Literal, Self

import attrs

from tractkv.ids import ObjectId
from tractkv.model import MAX_OBJECT_BYTES

#: Why a ref update was refused (git's ``ng <reason>``).
RejectReason = Literal[
    "stale",  # the ref's value is not the expected old value (someone moved it since it was read)
    "non-fast-forward",  # the new value does not descend from the current one, and force was not given
    "missing-objects",  # the new value's closure is not complete on the receiving side
    "forbidden",  # the credentials may not write this ref
    "atomic",  # another update of the same atomic push was refused, so this one was not applied
    "invalid",  # malformed ref name or value, or the value is not a commit
    "over-budget",  # the receiving store's token budget of the branch refuses the new value
    "already-exists",  # a tag of that name names something else, and force was not given (tags never move)
]


@attrs.frozen
class RefUpdate:
    """Move ``name`` from ``old`` to ``new`` (``None`` = absent / delete).

    ``old`` is always checked (compare-and-swap); ``force`` only lifts the fast-forward rule, so a forced
    update with the expected old value is git's force-with-lease.
    """

    name: str
    old: ObjectId | None
    new: ObjectId | None
    force: bool = False


@attrs.frozen
class RefResult:
    """The outcome of one :class:`RefUpdate`: ``ok``, or refused with a :data:`RejectReason` and detail."""

    name: str
    ok: bool
    reason: RejectReason | None = None
    detail: str = ""


@attrs.frozen
class PushOutcome:
    """What a push did: per-ref results, and how many objects and bytes were sent / newly stored."""

    results: tuple[RefResult, ...]
    objects_sent: int
    bytes_sent: int

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


class Remote(abc.ABC):
    """One other store, reached through some transport. Use as a context manager (``close`` on exit).

    ``max_object`` is the largest object the other side takes (a hub announces its own with its refs;
    otherwise the one size limit), ``max_request`` the most one push may send in all (None: no limit),
    ``max_receive`` the largest this side takes from it;
    :func:`~tractkv.sync.transfer.push_to` refuses a push over either before sending anything.
    """

    url: str
    max_object: int = MAX_OBJECT_BYTES
    max_request: int | None = None
    #: The largest object a fetch from this remote takes (``fetch / pull / clone --max-object-bytes``, set by
    #: :func:`~tractkv.sync.transfer.fetch_from`); a transport that decodes a stream decodes up to it.
    max_receive: int = MAX_OBJECT_BYTES
    #: What the last :meth:`fetch` skipped as unverifiable (an S3 remote's packs: "<key>: <reason>"), for the
    #: caller to report; the objects it took all verified.
    skipped: tuple[str, ...] = ()

    @abc.abstractmethod
    def list_refs(self, prefix: str = "refs/heads/") -> dict[str, ObjectId]:
        """The other side's refs under ``prefix`` (full names -> ids)."""

    @abc.abstractmethod
    def missing(self, oids: Sequence[ObjectId]) -> set[ObjectId]:
        """Which of ``oids`` the other side does not have (one round trip, whatever the count)."""

    @abc.abstractmethod
    def push(
        self,
        objects: Iterable[tuple[ObjectId, bytes]],
        updates: Sequence[RefUpdate],
        *,
        atomic: bool = False,
    ) -> PushOutcome:
        """Send objects (verified and stored by the receiver, objects before refs), then apply the updates.

        Objects that arrived whole are kept even when the stream breaks or an update is refused, so a retry
        only sends the rest. ``atomic`` applies every update or none.
        """

    @abc.abstractmethod
    def fetch(
        self,
        wants: Sequence[ObjectId],
        haves: Sequence[ObjectId],
        known: Callable[[ObjectId], bool] | None = None,
    ) -> Iterator[tuple[ObjectId, bytes]]:
        """Stream the closure of ``wants`` minus what ``haves`` (commits the caller has whole) reach, links
        before the objects that name them.

        ``known`` answers "does the caller have this object?" (its store is closed under links, so a known
        object's whole closure is there too); transports that walk the other side object by object (S3) use
        it to stop early. The caller verifies every object (rehash) before storing it.
        """

    def close(self) -> None:  # noqa: B027 - transports without resources need nothing here
        """Release connections / files."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
