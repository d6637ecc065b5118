"""A remote that is a prefix in an S3-compatible bucket (``s3://bucket/prefix``; the ``s3`` extra: boto3).

There is no server to verify anything, so the protocol rests on S3's conditional writes. Layout (under the
prefix):

* ``packs/<nonce>-<tip>[-<tip>...].pack``: each push uploads its objects as one *pack* (several when it is
  over :data:`PACK_BYTES`), created with ``If-None-Match: *``, always before any ref that needs it. A pack is
  ``TKVPACK1\\n``, a u32 index length, the index (the 32-byte raw ids of its objects, in order) and then the
  objects as the object stream every transport uses (:mod:`tractkv.sync.frames`), links first. Its name
  carries a random nonce (two pushes never collide) and the commits the push moved refs to (at most
  :data:`NAMED_TIPS`, else none): every object of the pack is in the history of those tips, so a reader
  that already has them skips the pack without reading it. A pack is never modified.
* each branch is one object ``refs/heads/<name>`` (each tag ``refs/tags/<name>``: its commit's or annotated
  tag object's id; prune keeps what tags reach too) holding the hex id, replaced by compare-and-swap on its ETag
  (``If-Match``) or created with ``If-None-Match: *``. A failed condition (412, 409, or 404 on If-Match:
  servers differ) means another writer moved it: the push is refused, never silently lost;
* ``objects/<id>``: one object per key, the layout tractkv wrote before packs. It is still read (a fetch takes
  what no pack holds from there, level by level as before), never written: an old remote keeps working and
  new pushes add packs beside it. A tractkv older than packs cannot read what a newer one pushed.

Request counts. A push: the probe (four requests, once per connection), ``list_refs`` (one LIST and one GET per
branch), a LIST of ``packs/`` only when the push is large enough to ask what is missing (plus a ranged GET of
the index of any pack named after one of the pushed commits, or named after none), one PUT per pack, and per ref
one GET and one conditional PUT. A fetch or clone: ``list_refs`` (of branches, and of tags: one more LIST, and a
GET per tag), one LIST per 1,000 packs, and one GET per pack whose tips the fetcher lacks: O(pushes), never
O(commits). Only what no downloaded pack holds falls back to reading indexes, then loose objects.

Readers check everything: a pack's framing, index and the hash of every object before any of it is passed
on; the receiving store then verifies each object like any other transfer (:func:`.receive.verify` and the
validator). A pack name's tips are a hint: when they lie, the reader finds the objects anyway (indexes,
then loose objects) or reports the one it cannot find. A pack that does not verify (garbage bytes, cut
short, an index that lies, an object whose bytes do not hash to its id) is hostile input: a reader skips it
whole, uses none of it, and reports it (:attr:`S3Remote.skipped`, the fetch's ``skipped``); the fetch
succeeds with what verifies, or, when an object it needs is in no pack that verifies, fails naming that
object and the packs it skipped. Nothing a bucket holds can block every clone.

Interrupted push: the objects that arrived are uploaded as a pack of their own before the error propagates
(a prefix of a links-first stream: closed under links); no ref moved, and a retry asks which objects are
missing (it reads that pack's index) and sends only the rest.

Garbage: a pack no ref needs (a push refused after its upload, an interrupted push never retried) stays. It
is harmless: nothing refers to it, readers that have its tips skip it, a fetch that lacks them downloads it
and drops what no wanted commit reaches. :meth:`S3Remote.prune` (``tractkv remote prune NAME``) reads the
whole remote (refs first, then every pack, checked as a fetch checks them), deletes the packs no branch
needs that are older than a grace period (one hour by default, by the server's clock: a push in flight
uploads its pack before it moves its ref), and with ``--repack`` first writes everything the branches reach
as one new pack and deletes every older pack and loose object, so a clone takes one GET again. It reads the
refs again just before deleting and deletes nothing if one moved. ``missing`` (what a retried push relies
on) counts only packs younger than half the grace period, so a push never leans on a pack prune may take.
A pack that does not verify is no branch's (nothing can be read from it), so prune deletes it as any other
garbage once older than the grace period (an upload in flight is invisible until complete, and younger
packs stay); a pack of a later format (its magic names another version) is kept, and reported. What it
cannot see: a pusher stalled longer than the grace period between its pack and its ref, or a new
branch pushed from a commit that a force push removed from every branch and a prune then collected; run
prune with writers quiet, or keep the default grace.

One object per ref keeps agents pushing different branches from contending, at the price of cross-ref
atomicity: an ``atomic`` push of several refs is refused (use a hub for that). Deleting a branch is not
supported over S3 (S3 has no portable conditional delete). With no server to walk history on every push,
the fast-forward rule is the pusher's to check (:func:`tractkv.sync.transfer.push_to` does, before sending);
only a refused update's reason reads the bucket's history (the commits just pushed, and the pack named
after the commit the ref now holds), to tell ``stale`` from ``non-fast-forward`` as a hub would.

The endpoint, credentials and region come from the usual AWS settings, resolved by boto3 as for any client
(``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE`` and its config file, ``AWS_REGION`` / ``AWS_DEFAULT_REGION``); only when boto3 resolves no region
at all is ``us-east-1`` used (an S3-compatible server usually ignores it; boto3 would refuse to sign without
one). The addressing style is boto3's (virtual-hosted on AWS, path-style for a custom endpoint such as an IP
address or ``localhost``, or what the profile's ``s3.addressing_style`` says) unless the URL names one:
``s3://bucket/prefix?addressing=path`` (or ``virtual``, ``auto``).

Only writes need conditional writes: :meth:`S3Remote.probe` (run by ``remote add``, which keeps the remote
but says pushes will be refused, and before the first write of every push) refuses an endpoint that ignores
them; fetch and clone read, so they work on any endpoint.
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs

from tractkv.errors import (
    ConditionalWritesUnsupported,
    InvalidInput,
    MissingTransportExtra,
    ObjectTooLarge,
    RejectedObject,
    RemoteUnavailable,
    SyncError,
    TransferError,
    UnsupportedURL,
)
from tractkv.ids import ObjectId, hash_bytes, is_object_id, oid_to_raw, raw_to_oid
from tractkv.model import MAX_OBJECT_BYTES, Commit
from tractkv.model.objects import links_of

from .frames import OID_BYTES, UNLIMITED, decode_stream, encode_stream
from .receive import decode_limit, verify
from .remote import PushOutcome, RefResult, RefUpdate, Remote

HEADS = "refs/heads/"
TAGS = "refs/tags/"
WORKERS = 16  # concurrent requests for pack and object downloads
STALE_STATUSES = (409, 412, 404)

PACK_MAGIC = b"TKVPACK1\n"
PACK_FAMILY = b"TKVPACK"  # any version's magic starts so: a pack of a later version is not garbage
NEWER_PACK = "a pack of a later tractkv format"
PACK_HEAD = struct.Struct(">I")  # the index length, after the magic
PACK_SUFFIX = ".pack"
#: A push's objects go into packs of about this many bytes (one pack for most pushes).
PACK_BYTES = 64 * 1024 * 1024
#: At most this many tips are named in a pack's key (more: none, and readers read its index instead).
NAMED_TIPS = 8
INDEX_PROBE_BYTES = 64 * 1024  # the first ranged GET of an index; a larger index takes a second one
#: :meth:`S3Remote.prune` keeps unreferenced packs younger than this (a push in flight is between its pack's
#: upload and its ref's compare-and-swap).
PRUNE_GRACE_SECONDS = 3600


ADDRESSING_STYLES = ("auto", "path", "virtual")
DEFAULT_REGION = "us-east-1"  # only when boto3 resolves none (no AWS_REGION / AWS_DEFAULT_REGION / profile)


def parse_s3_url(url: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://bucket[/prefix][?addressing=STYLE]`` (prefix without slashes at either
    end)."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "s3" or not parts.netloc:
        raise UnsupportedURL(url, "an S3 remote is s3://bucket/prefix")
    addressing_style(url)
    return parts.netloc, parts.path.strip("/")


def addressing_style(url: str) -> str | None:
    """The ``addressing`` query parameter of an s3:// URL (None: boto3's default)."""
    query = parse_qs(urlsplit(url).query, keep_blank_values=True)
    unknown = set(query) - {"addressing"}
    if unknown:
        raise UnsupportedURL(url, f"unknown parameter {sorted(unknown)[0]!r} (an S3 URL takes addressing=)")
    values = query.get("addressing", [])
    if len(values) > 1 or (values and values[0] not in ADDRESSING_STYLES):
        raise UnsupportedURL(url, f"addressing= takes one of {', '.join(ADDRESSING_STYLES)}")
    return values[0] if values else None


# --- packs ----------------------------------------------------------------------------------------------------


def encode_pack(pairs: Sequence[tuple[ObjectId, bytes]]) -> bytes:
    """One pack: magic, index length, the raw ids in order, then the object stream of ``pairs``."""
    index = b"".join(oid_to_raw(oid) for oid, _ in pairs)
    stream = b"".join(encode_stream(pairs, chunk_bytes=PACK_BYTES))
    return b"".join((PACK_MAGIC, PACK_HEAD.pack(len(index)), index, stream))


def _index_length(data: bytes, where: str) -> int:
    """The index length a pack's first bytes announce (checks the magic)."""
    start = len(PACK_MAGIC)
    if data.startswith(PACK_FAMILY) and not data.startswith(PACK_MAGIC):
        raise TransferError(f"{where} is {NEWER_PACK} (upgrade tractkv to read it)")
    if len(data) < start + PACK_HEAD.size or data[:start] != PACK_MAGIC:
        raise TransferError(f"{where} is not a tractkv pack (bad magic)")
    (length,) = PACK_HEAD.unpack_from(data, start)
    if length % OID_BYTES:
        raise TransferError(f"{where}: malformed pack index ({length} bytes)")
    return int(length)


def _ids(index: bytes) -> list[ObjectId]:
    return [raw_to_oid(index[i : i + OID_BYTES]) for i in range(0, len(index), OID_BYTES)]


def decode_pack(data: bytes, where: str, max_object: int = MAX_OBJECT_BYTES) -> list[tuple[ObjectId, bytes]]:
    """The objects of a pack, after checking its framing, that its index lists exactly its objects, and the
    hash of every object: a pack is refused whole (:class:`TransferError` / :class:`RejectedObject`), before
    any of it is used. An object over ``max_object`` is :class:`ObjectTooLarge` (the reader's limit, which
    a fetch may raise: not a sign of a hostile pack)."""
    length = _index_length(data, where)
    start = len(PACK_MAGIC) + PACK_HEAD.size
    if len(data) < start + length:
        raise TransferError(f"{where}: pack cut short in its index")
    index = data[start : start + length]
    try:
        pairs = list(decode_stream([data[start + length :]], max_object=max_object, max_request=UNLIMITED))
    except TransferError as exc:
        if type(exc) is not TransferError:  # an object over the size limit: as raised
            raise
        raise TransferError(f"{where}: {exc.reason}", exc.oid) from None
    if len(pairs) * OID_BYTES != length or any(
        index[i * OID_BYTES : (i + 1) * OID_BYTES] != oid_to_raw(oid) for i, (oid, _) in enumerate(pairs)
    ):
        raise TransferError(f"{where}: the pack's index does not list its objects")
    for oid, body in pairs:
        if hash_bytes(body) != oid:
            raise RejectedObject(f"object bytes do not hash to their id (in {where})", oid)
    return pairs


@attrs.frozen
class PruneResult:
    """What :meth:`S3Remote.prune` did: packs listed, keys of the packs deleted, loose objects deleted,
    packs kept because they are younger than the grace period, keys of the packs a repack wrote."""

    packs: int
    deleted: tuple[str, ...]
    loose_deleted: int
    kept_young: int
    repacked: tuple[str, ...]
    #: the packs that did not verify ("<key>: <reason>"): deleted when old enough, unless of a later format
    unreadable: tuple[str, ...] = ()


@attrs.frozen
class PackEntry:
    """A pack as a LIST shows it: its key, size, age, and the tips its name claims (None: none named)."""

    key: str
    size: int
    modified: float  # seconds since the epoch (the server's clock)
    tips: tuple[ObjectId, ...] | None


def _named_tips(name: str) -> tuple[ObjectId, ...] | None:
    """The tips a pack's file name (``<nonce>-<tip>-...`` + suffix) claims; None when it names none or is not
    of that form."""
    parts = name.removesuffix(PACK_SUFFIX).split("-")
    tips = tuple(ObjectId(p) for p in parts[1:] if is_object_id(p))
    return tips if tips and len(tips) == len(parts) - 1 else None


class S3Remote(Remote):
    """A store laid out as packs, and one object per ref, in a bucket."""

    def __init__(self, url: str, *, client: Any = None) -> None:
        self.url = url
        self.bucket, prefix = parse_s3_url(url)
        self._prefix = f"{prefix}/" if prefix else ""
        if client is None:
            try:
                import boto3
                import botocore.session
                from botocore.config import Config
            except ImportError as exc:
                raise MissingTransportExtra("s3://", "s3", exc.name) from exc
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            style = addressing_style(url)
            try:
                core = botocore.session.get_session()
                _share_loader(core)
                session = boto3.session.Session(botocore_session=core)
                client = session.client(
                    "s3",
                    endpoint_url=endpoint,
                    region_name=session.region_name or DEFAULT_REGION,
                    config=Config(
                        s3={"addressing_style": style} if style else None,
                        retries={"max_attempts": 3, "mode": "standard"},
                        max_pool_connections=WORKERS,
                    ),
                )
            except self._client_error() as exc:  # a broken profile or config file
                raise RemoteUnavailable(f"cannot set up an S3 client for {url}: {exc}") from exc
        self._s3 = client
        #: HTTP requests sent through this remote's client (retries included), as HttpRemote counts them.
        self.requests = 0
        events = getattr(getattr(client, "meta", None), "events", None)
        if events is not None:
            events.register("before-send.s3", self._count)
        self._etags: dict[str, str] = {}  # ref key -> ETag as last read
        self._writable = False  # set once the probe passed (push probes before its first write)
        self._sent: dict[ObjectId, bytes] = {}  # this push's commits (a refusal's reason reads them)
        self._server_time: float | None = None  # the Date of the last LIST answer (prune's clock)

    def _count(self, **_: Any) -> None:
        self.requests += 1

    # --- plumbing -------------------------------------------------------------------------------------------

    def _object_key(self, oid: ObjectId) -> str:
        return f"{self._prefix}objects/{oid}"

    def _ref_key(self, name: str) -> str:
        return f"{self._prefix}{name}"

    def _error(self, exc: Exception, what: str) -> RemoteUnavailable:
        return RemoteUnavailable(f"S3 {what} failed on {self.url}: {exc}")

    @staticmethod
    def _status(exc: Exception) -> int | None:
        response = getattr(exc, "response", None)
        if isinstance(response, dict):
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return int(status) if status is not None else None
        return None

    def _client_error(self) -> type[Exception]:
        from botocore.exceptions import BotoCoreError, ClientError

        return (ClientError, BotoCoreError)  # type: ignore[return-value]

    def _list(self, prefix: str) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            try:
                page = self._s3.list_objects_v2(**kwargs)
            except self._client_error() as exc:
                raise self._error(exc, "list") from exc
            date = page.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
            if date:
                with contextlib.suppress(TypeError, ValueError):
                    self._server_time = parsedate_to_datetime(date).timestamp()
            yield from page.get("Contents", [])
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def _keys(self, prefix: str) -> Iterator[str]:
        for item in self._list(prefix):
            yield item["Key"]

    def _get(self, key: str, range_: str | None = None) -> tuple[bytes, str] | None:
        try:
            if range_ is None:
                response = self._s3.get_object(Bucket=self.bucket, Key=key)
            else:
                response = self._s3.get_object(Bucket=self.bucket, Key=key, Range=range_)
        except self._client_error() as exc:
            if self._status(exc) == 404:
                return None
            raise self._error(exc, f"get {key}") from exc
        return response["Body"].read(), response["ETag"]

    # --- checks ---------------------------------------------------------------------------------------------

    def probe(self) -> None:
        """Raise :class:`ConditionalWritesUnsupported` unless the endpoint enforces If-None-Match / If-Match."""
        key = f"{self._prefix}probe/{uuid.uuid4().hex}"
        try:
            first = self._s3.put_object(Bucket=self.bucket, Key=key, Body=b"1", IfNoneMatch="*")
        except self._client_error() as exc:
            raise self._error(exc, "probe write") from exc
        try:
            for kwargs in ({"IfNoneMatch": "*"}, {"IfMatch": '"0000000000000000"'}):
                try:
                    self._s3.put_object(Bucket=self.bucket, Key=key, Body=b"2", **kwargs)
                except self._client_error() as exc:
                    if self._status(exc) in STALE_STATUSES:
                        continue
                    raise self._error(exc, "probe write") from exc
                raise ConditionalWritesUnsupported(
                    f"{self.url} accepted a write whose {next(iter(kwargs))} condition was false: concurrent "
                    "pushes could silently lose each other's work, so tractkv will not push to it"
                )
            if not first.get("ETag"):
                raise ConditionalWritesUnsupported(
                    f"{self.url} returns no ETag: refs cannot be compared and swapped"
                )
        finally:
            try:
                self._s3.delete_object(Bucket=self.bucket, Key=key)
            except self._client_error():
                pass

    def check_writable(self) -> None:
        """Probe once before writing: :class:`ConditionalWritesUnsupported` (saying reads still work) when the
        endpoint ignores conditional writes."""
        if self._writable:
            return
        try:
            self.probe()
        except ConditionalWritesUnsupported as exc:
            raise ConditionalWritesUnsupported(
                f"cannot push: {exc} (fetch and clone read without conditions, so they still work)"
            ) from None
        self._writable = True

    # --- packs ----------------------------------------------------------------------------------------------

    def list_packs(self) -> list[PackEntry]:
        """Every pack under the prefix (one LIST request per 1,000), oldest first."""
        start = f"{self._prefix}packs/"
        out = []
        for item in self._list(start):
            key = item["Key"]
            if not key.endswith(PACK_SUFFIX):
                continue
            out.append(
                PackEntry(
                    key=key,
                    size=int(item.get("Size", 0)),
                    modified=_timestamp(item.get("LastModified")),
                    tips=_named_tips(key[len(start) :]),
                )
            )
        out.sort(key=lambda p: (p.modified, p.key))
        return out

    def _read_pack(self, key: str) -> list[tuple[ObjectId, bytes]]:
        got = self._get(key)
        if got is None:  # pruned since it was listed
            return []
        return decode_pack(got[0], f"{self.url}: {key}", self.max_receive)

    def read_index(self, key: str) -> list[ObjectId]:
        """The ids a pack holds, from its index (one ranged GET, two for an index over 64 KiB)."""
        where = f"{self.url}: {key}"
        got = self._get(key, f"bytes=0-{INDEX_PROBE_BYTES - 1}")
        if got is None:
            return []
        head = got[0]
        length = _index_length(head, where)
        start = len(PACK_MAGIC) + PACK_HEAD.size
        if len(head) < start + length:
            more = self._get(key, f"bytes={len(head)}-{start + length - 1}")
            head += more[0] if more else b""
            if len(head) < start + length:
                raise TransferError(f"{where}: pack cut short in its index")
        return _ids(head[start : start + length])

    def _put_pack(self, pairs: Sequence[tuple[ObjectId, bytes]], tips: Sequence[ObjectId]) -> str:
        named = "-".join(dict.fromkeys(tips)) if 0 < len(set(tips)) <= NAMED_TIPS else ""
        key = f"{self._prefix}packs/{uuid.uuid4().hex[:16]}{'-' if named else ''}{named}{PACK_SUFFIX}"
        try:
            self._s3.put_object(Bucket=self.bucket, Key=key, Body=encode_pack(pairs), IfNoneMatch="*")
        except self._client_error() as exc:
            raise self._error(exc, "put pack") from exc
        return key

    # --- Remote ---------------------------------------------------------------------------------------------

    def list_refs(self, prefix: str = HEADS) -> dict[str, ObjectId]:
        out: dict[str, ObjectId] = {}
        for key in self._keys(self._ref_key(prefix)):
            got = self._get(key)
            if got is None:
                continue
            body, etag = got
            value = body.decode("ascii", "replace").strip()
            name = key[len(self._prefix) :]
            if is_object_id(value):
                out[name] = ObjectId(value)
                self._etags[key] = etag
        return out

    def _all_refs(self) -> dict[str, ObjectId]:
        """Every branch and tag: what prune keeps."""
        return {**self.list_refs(HEADS), **self.list_refs(TAGS)}

    def missing(self, oids: Sequence[ObjectId]) -> set[ObjectId]:
        """Which of ``oids`` no pack holds, as far as the indexes of the packs named after one of ``oids`` (or
        after no commit) tell: another pack's objects are in the history of commits not asked about, which
        the asker has already left out. Only packs younger than half of :data:`PRUNE_GRACE_SECONDS` count:
        one no branch needs may be pruned once older, and this push must not rely on it. An object reported
        missing that is there after all is sent again, harmlessly; loose objects (the old layout) are not
        consulted."""
        wanted = set(oids)
        packs = self.list_packs()
        now = self._server_time or time.time()
        relevant = [
            p.key
            for p in packs
            if (p.tips is None or not wanted.isdisjoint(p.tips))
            and now - p.modified < PRUNE_GRACE_SECONDS / 2
        ]
        with ThreadPoolExecutor(WORKERS) as pool:
            for ids in pool.map(self._index_or_nothing, relevant):
                wanted.difference_update(ids)
        return wanted

    def _index_or_nothing(self, key: str) -> list[ObjectId]:
        """A pack's ids, or none when it cannot be read as a pack (a push then sends those objects again)."""
        try:
            return self.read_index(key)
        except TransferError:
            return []

    def push(
        self,
        objects: Iterable[tuple[ObjectId, bytes]],
        updates: Sequence[RefUpdate],
        *,
        atomic: bool = False,
    ) -> PushOutcome:
        if atomic and len(updates) > 1:
            return PushOutcome(
                results=tuple(
                    RefResult(u.name, False, "atomic", "S3 remotes cannot update several refs atomically")
                    for u in updates
                ),
                objects_sent=0,
                bytes_sent=0,
            )
        self.check_writable()  # before any object is written
        tips = [u.new for u in updates if u.new is not None]
        sent = [0, 0]
        pending: list[tuple[ObjectId, bytes]] = []
        size = 0
        self._sent = {}
        try:
            for oid, data in objects:
                pending.append((oid, data))
                size += len(data)
                sent[0] += 1
                sent[1] += len(data)
                if _looks_like_commit(data):
                    self._sent[oid] = data
                if size >= PACK_BYTES:
                    self._put_pack(pending, tips)
                    pending, size = [], 0
        except Exception:
            if pending:  # keep what arrived (a links-first prefix): a retry sends only the rest
                with contextlib.suppress(RemoteUnavailable):
                    self._put_pack(pending, tips)
            raise
        if pending:
            self._put_pack(pending, tips)  # objects first, all of them, before any ref moves
        try:
            results = tuple(self._update(u) for u in updates)
        finally:
            self._sent = {}
        return PushOutcome(results=results, objects_sent=sent[0], bytes_sent=sent[1])

    def _update(self, update: RefUpdate) -> RefResult:
        if not update.name.startswith((HEADS, TAGS)):
            return RefResult(
                update.name,
                False,
                "invalid",
                "only branches (refs/heads/...) and tags (refs/tags/...) can be pushed",
            )
        if update.new is None:
            return RefResult(
                update.name, False, "invalid", "deleting a branch or tag is not supported on S3 remotes"
            )
        key = self._ref_key(update.name)
        current = self._get(key)
        value = current[0].decode("ascii", "replace").strip() if current else None
        if value != update.old:
            return self._moved(update, value)
        condition = {"IfMatch": current[1]} if current else {"IfNoneMatch": "*"}
        try:
            response = self._s3.put_object(
                Bucket=self.bucket, Key=key, Body=f"{update.new}\n".encode(), **condition
            )
        except self._client_error() as exc:
            if self._status(exc) in STALE_STATUSES:
                again = self._get(key)
                return self._moved(update, again[0].decode("ascii", "replace").strip() if again else None)
            raise self._error(exc, f"update {update.name}") from exc
        self._etags[key] = response.get("ETag", "")
        return RefResult(update.name, True)

    def _moved(self, update: RefUpdate, value: str | None) -> RefResult:
        """The refusal of an update whose ref is no longer at the expected old value, worded as a hub's:
        ``non-fast-forward`` when the new value does not contain the current one (pull and merge), else
        ``stale`` (re-read and retry)."""
        detail = f"expected {update.old or 'absent'}, found {value or 'absent'}"
        if (
            update.force
            or value is None
            or update.new is None
            or not is_object_id(value)
            or self._contains(update.new, ObjectId(value))
        ):
            return RefResult(update.name, False, "stale", detail)
        return RefResult(update.name, False, "non-fast-forward", f"{detail}: someone pushed first")

    def _contains(self, tip: ObjectId, ancestor: ObjectId) -> bool:
        """Whether ``ancestor`` is in the history of ``tip``, read from the commits this push sent and the
        bucket.

        Commit times grow strictly along every edge, so the walk goes newest first and never below
        ``ancestor``'s time: after a race lost to another pusher it reads the few commits pushed since,
        not the whole history. A commit it cannot find counts as "not contained".
        """
        found: dict[ObjectId, bytes] = dict(self._sent)
        packs: list[PackEntry] | None = None

        def commit(oid: ObjectId) -> Commit:
            nonlocal packs
            if oid not in found:
                if packs is None:
                    packs = self.list_packs()
                for pack in packs:  # the pack named after it holds it (the pack its pusher uploaded)
                    if pack.tips is not None and oid in pack.tips:
                        found.update(self._read_pack(pack.key))
                        break
                if oid not in found:
                    found[oid] = self._get_object(oid)  # the old layout
            obj = verify(oid, found[oid], decode_limit(MAX_OBJECT_BYTES))
            if not isinstance(obj, Commit):
                raise TransferError(f"{oid} is a {obj.KIND}, not a commit", oid)
            return obj

        try:
            target = commit(ancestor)
            pending = [tip]
            seen: set[ObjectId] = set()
            while pending:
                oid = pending.pop()
                if oid == ancestor:
                    return True
                if oid in seen:
                    continue
                seen.add(oid)
                obj = commit(oid)
                if obj.created_at > target.created_at:
                    pending.extend(obj.parents)
        except TransferError:
            return False
        return False

    def fetch(
        self,
        wants: Sequence[ObjectId],
        haves: Sequence[ObjectId],
        known: Callable[[ObjectId], bool] | None = None,
    ) -> Iterator[tuple[ObjectId, bytes]]:
        """Download, in parallel, every pack whose named tips the caller lacks (``haves`` and ``known`` say
        what it has: its store is closed under links), then walk the closure of ``wants`` through them; what
        no downloaded pack holds comes from the other packs' indexes, then from loose objects (the old layout,
        level by level). Yields the closure links-first; nothing is yielded before every pack is checked."""
        stop = set(haves)
        memo: dict[ObjectId, bool] = {}

        def have(oid: ObjectId) -> bool:
            here = memo.get(oid)
            if here is None:
                here = memo[oid] = oid in stop or (known is not None and known(oid))
            return here

        self.skipped = ()
        roots = [w for w in dict.fromkeys(wants) if not have(w)]
        if not roots:
            return
        with ThreadPoolExecutor(WORKERS) as pool:
            reading = _Reading(self, pool, self.list_packs())
            chosen = [p.key for p in reading.packs if p.tips is not None and not all(have(t) for t in p.tips)]
            unnamed = [p.key for p in reading.packs if p.tips is None]
            reading.read_indexes(unnamed)
            chosen += [
                k for k in unnamed if k not in reading.bad and not all(have(i) for i in reading.indexes[k])
            ]
            reading.download(chosen)
            try:
                order = reading.closure(roots, have)
            finally:
                self.skipped = tuple(reading.bad.values())
        for oid in order:
            yield oid, reading.objects[oid]

    def prune(self, *, min_age: float = PRUNE_GRACE_SECONDS, repack: bool = False) -> PruneResult:
        """Delete the packs no branch needs that are older than ``min_age`` seconds (by the server's clock);
        with ``repack``, first write everything the branches reach as one new pack and delete every pack
        and loose object older than ``min_age`` (younger ones may belong to a push in flight: kept).

        Reads the whole remote (every pack, and loose objects level by level) and checks it as a fetch
        does: a pack that does not verify is skipped (and, as no branch can need it, deleted once older than
        ``min_age``; one of a later format is kept); a branch needing an object no verified pack or loose
        object holds refuses the prune before anything is deleted."""
        if repack:
            self.check_writable()
        refs = self._all_refs()  # refs before packs: every pack a listed ref needs is listed
        tips = sorted(set(refs.values()))
        if not tips:
            raise InvalidInput(
                f"{self.url} has no branches: prune keeps what branches need, so it would delete every pack "
                "(delete the prefix itself if that is what you want)"
            )
        with ThreadPoolExecutor(WORKERS) as pool:
            reading = _Reading(self, pool, self.list_packs())
            now = self._server_time or time.time()
            reading.download([p.key for p in reading.packs])
            reachable = reading.closure(tips, lambda _oid: False)
        needed = set(reachable)
        later = {key for key, reason in reading.bad.items() if NEWER_PACK in reason}  # not ours to judge
        old = [p for p in reading.packs if now - p.modified >= min_age and p.key not in later]
        young = sum(1 for p in reading.packs if now - p.modified < min_age)
        loose: list[str] = []
        new_pack = None
        if repack and (len(reading.packs) > 1 or reading.loose):
            new_pack = self._upload([(oid, reading.objects[oid]) for oid in reachable], tips)
            doomed = [p.key for p in old]
            loose = [
                item["Key"]
                for item in self._list(f"{self._prefix}objects/")
                if now - _timestamp(item.get("LastModified")) >= min_age
            ]
        else:
            doomed = [p.key for p in old if needed.isdisjoint(reading.indexes.get(p.key, ()))]
        if self._all_refs() != refs:  # a push landed meanwhile: what it needs may be in a doomed pack
            raise SyncError(f"{self.url} changed while pruning: nothing was deleted (run it again)")
        self._delete(doomed + loose)
        return PruneResult(
            packs=len(reading.packs),
            deleted=tuple(doomed),
            loose_deleted=len(loose),
            kept_young=young,
            repacked=tuple(new_pack or ()),
            unreadable=tuple(reading.bad.values()),
        )

    def _upload(self, pairs: Sequence[tuple[ObjectId, bytes]], tips: Sequence[ObjectId]) -> list[str]:
        """``pairs`` as packs of about :data:`PACK_BYTES`; their keys."""
        keys: list[str] = []
        pending: list[tuple[ObjectId, bytes]] = []
        size = 0
        for pair in pairs:
            pending.append(pair)
            size += len(pair[1])
            if size >= PACK_BYTES:
                keys.append(self._put_pack(pending, tips))
                pending, size = [], 0
        if pending:
            keys.append(self._put_pack(pending, tips))
        return keys

    def _delete(self, keys: Sequence[str]) -> None:
        for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1,000 keys
            chunk = keys[start : start + 1000]
            try:
                response = self._s3.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
                )
            except self._client_error() as exc:
                raise self._error(exc, "delete") from exc
            errors = response.get("Errors") or []
            if errors:
                raise RemoteUnavailable(
                    f"S3 delete failed on {self.url}: {errors[0].get('Message', errors[0])}"
                )

    def _get_object(self, oid: ObjectId) -> bytes:
        got = self._get(self._object_key(oid))
        if got is None:
            raise TransferError(f"{self.url} lacks an object its refs need", oid)
        return got[0]

    def close(self) -> None:
        close = getattr(self._s3, "close", None)
        if close is not None:
            close()


class _Reading:
    """One read of a bucket: the packs listed, what was downloaded (every pack's objects hash-checked), the
    indexes read, and how many loose objects were needed."""

    def __init__(self, remote: S3Remote, pool: ThreadPoolExecutor, packs: list[PackEntry]) -> None:
        self.remote = remote
        self.pool = pool
        self.packs = packs
        self.objects: dict[ObjectId, bytes] = {}
        self.indexes: dict[str, list[ObjectId]] = {}  # key -> ids, for every pack read or downloaded
        self.downloaded: set[str] = set()
        self.bad: dict[str, str] = {}  # key -> why: packs that did not verify, skipped whole
        self.loose = 0
        self._relisted = False

    def _checked(self, read: Callable[[str], Any], key: str) -> Any:
        """``read(key)``, or None (the pack recorded as bad) when the pack does not verify."""
        try:
            return read(key)
        except ObjectTooLarge:  # over this reader's limit, which the user may raise: said as it is
            raise
        except TransferError as exc:  # garbage, cut short, lying index, bad hash: hostile input
            reason = exc.reason
            self.bad[key] = reason if key in reason else f"{key}: {reason}"
            return None

    def read_indexes(self, keys: list[str]) -> None:
        keys = [k for k in keys if k not in self.indexes and k not in self.bad]
        results = self.pool.map(lambda k: self._checked(self.remote.read_index, k), keys)
        for key, ids in zip(keys, results, strict=True):
            self.indexes[key] = ids if ids is not None else []

    def download(self, keys: list[str]) -> None:
        keys = [k for k in keys if k not in self.downloaded and k not in self.bad]
        results = self.pool.map(lambda k: self._checked(self.remote._read_pack, k), keys)
        for key, pairs in zip(keys, results, strict=True):
            self.downloaded.add(key)
            if pairs is None:  # none of it is used, not even its index
                self.indexes[key] = []
                continue
            self.indexes[key] = [oid for oid, _ in pairs]
            self.objects.update(pairs)

    def find(self, absent: list[ObjectId]) -> None:
        """Objects no downloaded pack held: from the packs whose index lists them (the indexes of the packs
        not downloaded are read, once; the packs are listed again once, in case a prune folded them into a
        new pack since), else loose (``objects/<id>``); :class:`TransferError` for an object found nowhere."""
        wanted = set(absent)
        for attempt in range(2):
            self.read_indexes([p.key for p in self.packs])
            self.download([k for k, ids in self.indexes.items() if not wanted.isdisjoint(ids)])
            wanted.difference_update(self.objects)
            if not wanted or self._relisted or attempt:
                break
            self._relisted = True
            self.packs = self.remote.list_packs()
        loose = [oid for oid in absent if oid not in self.objects]
        try:
            found = list(zip(loose, self.pool.map(self.remote._get_object, loose), strict=True))
        except TransferError as exc:
            if not self.bad or exc.oid is None:
                raise
            skipped = "; ".join(self.bad.values())
            raise TransferError(
                f"{self.remote.url}: an object its refs need is in no pack that verifies and not stored "
                f"loose; skipped {len(self.bad)} pack(s) that did not verify: {skipped}",
                exc.oid,
            ) from None
        for oid, data in found:
            if hash_bytes(data) != oid:
                raise RejectedObject("object bytes do not hash to their id", oid)
            self.objects[oid] = data
        self.loose += len(loose)

    def closure(self, roots: list[ObjectId], have: Callable[[ObjectId], bool]) -> list[ObjectId]:
        """The closure of ``roots`` without what ``have`` says is there, links first; objects are taken from
        what was downloaded, else found (:meth:`find`) a level at a time."""
        links: dict[ObjectId, tuple[ObjectId, ...]] = {}
        frontier = roots
        seen = set(roots)
        while frontier:
            absent = [oid for oid in frontier if oid not in self.objects]
            if absent:
                self.find(absent)
            following: list[ObjectId] = []
            for oid in frontier:
                links[oid] = out = tuple(_links(self.objects[oid]))
                for link in out:
                    if link not in seen and not have(link):
                        seen.add(link)
                        following.append(link)
            frontier = following
        return list(_post_order(roots, links))


def _timestamp(modified: Any) -> float:
    """A LIST entry's LastModified (a datetime from boto3) in seconds since the epoch (0 when absent)."""
    return float(modified.timestamp()) if hasattr(modified, "timestamp") else 0.0


_LOADER: list[Any] = []  # botocore's data loader, shared by every client this process makes


def _share_loader(core: Any) -> None:
    """Give a new botocore session the data loader of the first one: it caches the parsed service model
    and endpoint files (read-only data, the same for every client), which otherwise cost ~0.1-0.3 s per
    client (a clone makes two). Credentials, region and config are still resolved per session."""
    if _LOADER:
        core.register_component("data_loader", _LOADER[0])
    else:
        _LOADER.append(core.get_component("data_loader"))


def _looks_like_commit(data: bytes) -> bool:
    """Whether canonical object bytes may be a commit (the kind tag ``"t": "commit"``; a false positive only
    keeps an object in memory for the push)."""
    return b"\x61t\x66commit" in data


def _links(data: bytes) -> Iterator[ObjectId]:
    """The links of bytes whose hash was checked, to order them; bytes that do not decode have none here
    (the receiving store's strict verify refuses them, with the reason)."""
    try:
        return iter(links_of(data))  # only the link fields; the receiver then verifies the whole object
    except Exception:  # hostile bytes: the receiver's strict verify names the problem
        return iter(())


def _post_order(roots: list[ObjectId], links: dict[ObjectId, tuple[ObjectId, ...]]) -> Iterator[ObjectId]:
    """``roots`` and what they link within ``links``, each after the objects it links."""
    done: set[ObjectId] = set()
    for root in roots:
        if root in done:
            continue
        done.add(root)
        stack = [(root, iter(links[root]))]
        while stack:
            oid, pending = stack[-1]
            for link in pending:
                if link in done or link not in links:
                    continue
                done.add(link)
                stack.append((link, iter(links[link])))
                break
            else:
                stack.pop()
                yield oid
