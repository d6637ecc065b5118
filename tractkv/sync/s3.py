"""A remote that is a prefix in an S3-compatible bucket (``s3://bucket/prefix``; the ``s3`` extra: boto3).

There is no server to verify anything, so the protocol rests on S3's conditional writes:

* objects live at ``<prefix>/objects/<id>``, written create-only (``If-None-Match: *``; a 412 means the
  object is there already, which content addressing makes harmless), always before any ref that needs them;
* each branch is one object ``<prefix>/refs/heads/<name>`` holding the hex id, replaced by compare-and-swap
  on its ETag (``If-Match``) or created with ``If-None-Match: *``. A failed condition (412, 409, or 404 on
  If-Match: servers differ) means another writer moved it: the push is refused, never silently lost;
* readers rehash every object (the receiving store verifies it like any other transfer).

One object per ref keeps agents pushing different branches from contending, at the price of cross-ref
atomicity: an ``atomic`` push of several refs is refused (use a hub for that). Deleting a branch is not
supported over S3 (S3 has no portable conditional delete). With no server to walk history on every push,
the fast-forward rule is the pusher's to check (:func:`tractkv.sync.transfer.push_to` does, before sending);
only a refused update's reason walks the bucket's history, to tell ``stale`` from ``non-fast-forward`` as
a hub would.

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

import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tractkv.errors import (
    ConditionalWritesUnsupported,
    MissingExtra,
    RemoteUnavailable,
    TransferError,
    UnsupportedURL,
)
from tractkv.ids import ObjectId, is_object_id, raw_to_oid
from tractkv.model import Commit
from tractkv.store import Reader, Table
from tractkv.store.walk import iter_reachable

from .receive import verify
from .remote import PushOutcome, RefResult, RefUpdate, Remote

HEADS = "refs/heads/"
WORKERS = 16  # concurrent requests for object uploads and downloads
STALE_STATUSES = (409, 412, 404)


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


class S3Remote(Remote):
    """A store laid out as objects and one-object-per-ref in a bucket."""

    def __init__(self, url: str, *, client: Any = None) -> None:
        self.url = url
        self.bucket, prefix = parse_s3_url(url)
        self._prefix = f"{prefix}/" if prefix else ""
        if client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError as exc:
                raise MissingExtra("s3://", "s3", exc.name) from exc
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            style = addressing_style(url)
            try:
                session = boto3.session.Session()
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
        self._etags: dict[str, str] = {}  # ref key -> ETag as last read
        self._writable = False  # set once the probe passed (push probes before its first write)

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

    def _keys(self, prefix: str) -> Iterator[str]:
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            try:
                page = self._s3.list_objects_v2(**kwargs)
            except self._client_error() as exc:
                raise self._error(exc, "list") from exc
            for item in page.get("Contents", []):
                yield item["Key"]
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def _get(self, key: str) -> tuple[bytes, str] | None:
        try:
            response = self._s3.get_object(Bucket=self.bucket, Key=key)
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

    def missing(self, oids: Sequence[ObjectId]) -> set[ObjectId]:
        wanted = set(oids)
        if len(wanted) <= 64:
            with ThreadPoolExecutor(WORKERS) as pool:
                present = dict(zip(wanted, pool.map(self._exists, wanted), strict=True))
            return {oid for oid, here in present.items() if not here}
        start = len(f"{self._prefix}objects/")
        stored = {key[start:] for key in self._keys(f"{self._prefix}objects/")}
        return {oid for oid in wanted if oid not in stored}

    def _exists(self, oid: ObjectId) -> bool:
        try:
            self._s3.head_object(Bucket=self.bucket, Key=self._object_key(oid))
        except self._client_error() as exc:
            if self._status(exc) == 404:
                return False
            raise self._error(exc, "head") from exc
        return True

    def _put_object(self, pair: tuple[ObjectId, bytes]) -> int:
        oid, data = pair
        try:
            self._s3.put_object(Bucket=self.bucket, Key=self._object_key(oid), Body=data, IfNoneMatch="*")
        except self._client_error() as exc:
            if self._status(exc) in (412, 409):
                return 0  # there already: same id, same bytes
            raise self._error(exc, f"put object {oid}") from exc
        return 1

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
        sent = [0, 0]

        def counted() -> Iterator[tuple[ObjectId, bytes]]:
            for pair in objects:
                sent[0] += 1
                sent[1] += len(pair[1])
                yield pair

        with ThreadPoolExecutor(WORKERS) as pool:
            for _ in pool.map(self._put_object, counted()):
                pass  # objects first, all of them, before any ref moves
        results = tuple(self._update(u) for u in updates)
        return PushOutcome(results=results, objects_sent=sent[0], bytes_sent=sent[1])

    def _update(self, update: RefUpdate) -> RefResult:
        if not update.name.startswith(HEADS):
            return RefResult(update.name, False, "invalid", "only branches (refs/heads/...) can be pushed")
        if update.new is None:
            return RefResult(
                update.name, False, "invalid", "deleting a branch is not supported on S3 remotes"
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
        """Whether ``ancestor`` is in the history of ``tip``, read from the bucket.

        Commit times grow strictly along every edge, so the walk goes newest first and never below
        ``ancestor``'s time: after a race lost to another pusher it reads the few commits pushed since,
        not the whole history. An object the bucket lacks counts as "not contained".
        """
        try:
            target = self._commit(ancestor)
            pending = [tip]
            seen: set[ObjectId] = set()
            while pending:
                oid = pending.pop()
                if oid == ancestor:
                    return True
                if oid in seen:
                    continue
                seen.add(oid)
                commit = self._commit(oid)
                if commit.created_at > target.created_at:
                    pending.extend(commit.parents)
        except TransferError:
            return False
        return False

    def _commit(self, oid: ObjectId) -> Commit:
        obj = verify(oid, self._get_object(oid))
        if not isinstance(obj, Commit):
            raise TransferError(f"{oid} is a {obj.KIND}, not a commit", oid)
        return obj

    def fetch(
        self,
        wants: Sequence[ObjectId],
        haves: Sequence[ObjectId],
        known: Callable[[ObjectId], bool] | None = None,
    ) -> Iterator[tuple[ObjectId, bytes]]:
        """Walk the closure of ``wants`` level by level with parallel GETs, pruned at ``haves`` and at ids
        ``known`` says the caller has (its store is closed under links), then yield it links-first."""
        stop = set(haves)
        fetched: dict[ObjectId, bytes] = {}
        frontier = [w for w in dict.fromkeys(wants) if w not in stop and not (known and known(w))]
        with ThreadPoolExecutor(WORKERS) as pool:
            while frontier:
                level = list(zip(frontier, pool.map(self._get_object, frontier), strict=True))
                seen_next: dict[ObjectId, None] = {}
                for oid, data in level:
                    fetched[oid] = data
                    for link in verify(oid, data).iter_links():  # rehash before following any link
                        if link in fetched or link in stop or link in seen_next or (known and known(link)):
                            continue
                        seen_next[link] = None
                frontier = list(seen_next)
        yield from _links_first(fetched, list(dict.fromkeys(wants)))

    def _get_object(self, oid: ObjectId) -> bytes:
        got = self._get(self._object_key(oid))
        if got is None:
            raise TransferError(f"{self.url} lacks an object its refs need", oid)
        return got[0]

    def close(self) -> None:
        close = getattr(self._s3, "close", None)
        if close is not None:
            close()


class _Fetched(Reader):
    """The objects a fetch downloaded, as a read-only Reader (so the shared walk orders them)."""

    def __init__(self, objects: dict[ObjectId, bytes]) -> None:
        self._objects = objects

    def _raw_get(self, table: Table, key: bytes) -> bytes | None:
        return self._objects.get(raw_to_oid(key)) if table == Table.OBJECTS else None


def _links_first(objects: dict[ObjectId, bytes], roots: list[ObjectId]) -> Iterator[tuple[ObjectId, bytes]]:
    """``objects`` in post-order from ``roots`` (each after the objects it links that were downloaded)."""
    for oid in iter_reachable(_Fetched(objects), roots):
        yield oid, objects[oid]
