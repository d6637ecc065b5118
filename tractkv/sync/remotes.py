"""Remote configuration: named remotes in the store's local ``meta`` table (``remote:<name>`` -> CBOR
``{"url", "token_env"}``, never synced), URL kinds, and opening a :class:`~tractkv.sync.remote.Remote`.

Tokens for an HTTP hub come from the environment variable the remote names (``token_env``), else
``TRACTKV_TOKEN``; they never appear in a URL, in config or in a message.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tractkv import codec
from tractkv.engine.history import REMOTES
from tractkv.errors import (
    InvalidInput,
    MissingTransportExtra,
    RemoteExists,
    RemoteNotFound,
    UnsupportedURL,
)
from tractkv.store import Store, Table

from .remote import Remote

if TYPE_CHECKING:
    from .http_client import HttpRemote

REMOTE_KEY = b"remote:"
TOKEN_ENV = "TRACTKV_TOKEN"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_remote_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.endswith(".lock"):
        raise InvalidInput(f"invalid remote name {name!r}: letters, digits, '.', '_' and '-' (up to 64)")
    return name


def remote_config(store: Store, name: str) -> dict[str, Any]:
    raw = store.table_get(Table.META, REMOTE_KEY + check_remote_name(name).encode())
    if raw is None:
        raise RemoteNotFound(name)
    config = codec.loads(raw)
    assert isinstance(config, dict)
    return config


def list_remotes(store: Store) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in store.table_iter(Table.META, REMOTE_KEY):
        config = codec.loads(value)
        if isinstance(config, dict) and isinstance(config.get("url"), str):
            out[key[len(REMOTE_KEY) :].decode()] = config["url"]
    return out


def add_remote(
    store: Store, name: str, url: str, *, token_env: str | None = None, probe: bool = True
) -> str | None:
    """Record a remote. The URL must be of a kind tractkv can reach, well formed (an http(s) URL names a
    host, an s3 URL a bucket); a relative path (a store or a bundle) is recorded absolute, resolved against
    the current directory now, so a later fetch from another directory reaches the same place. With
    ``probe``, S3 endpoints are probed for conditional writes: one that ignores them (where concurrent pushes
    could silently lose each other's work) is still recorded, since fetching needs no conditions, and the
    returned note says why pushes to it will be refused (None: nothing to say)."""
    from tractkv.errors import ConditionalWritesUnsupported

    key = REMOTE_KEY + check_remote_name(name).encode()
    if store.table_get(Table.META, key) is not None:
        raise RemoteExists(name)
    kind = url_kind(url)
    if kind in ("path", "bundle") and not url.lower().startswith("file://"):
        url = os.path.abspath(url)  # as the caller meant it: not against wherever a later fetch runs
    if kind == "http":
        _http_remote()  # refuse now, not at the first fetch, when the server extra is missing
    note = None
    if kind == "s3":
        from .s3 import S3Remote

        remote = S3Remote(url)  # checks the URL (and the s3 extra) even without a probe
        try:
            if probe:
                remote.probe()
        except ConditionalWritesUnsupported as exc:
            note = f"{exc}: fetch and clone work, push will be refused"
        finally:
            remote.close()
    config: dict[str, Any] = {"url": url}
    if token_env is not None:
        config["token_env"] = token_env
    batch = store.new_batch()
    batch.table_put(Table.META, key, codec.dumps(config))
    store.apply(batch)
    return note


def remove_remote(store: Store, name: str) -> int:
    """Forget a remote and its tracking refs (one transaction). Returns how many tracking refs went.

    Raises:
        RemoteNotFound: no such remote (the message lists the remotes there are).
    """
    try:
        remote_config(store, name)
    except RemoteNotFound as exc:
        raise RemoteNotFound(name, sorted(list_remotes(store))) from exc
    batch = store.new_batch()
    batch.table_put(Table.META, REMOTE_KEY + name.encode(), None)
    prefix = f"{REMOTES}{name}/"
    dropped = 0
    for ref, value in store.iter_refs(prefix):
        batch.set_ref(ref, None, expected=value)
        dropped += 1
    store.apply(batch)
    return dropped


# --- transports ---------------------------------------------------------------------------------------------


def url_kind(url: str) -> str:
    """``path``, ``bundle``, ``http`` or ``s3`` (raises UnsupportedURL for anything else)."""
    if not isinstance(url, str) or not url:
        raise UnsupportedURL(str(url), "empty")
    lowered = url.lower()
    if lowered.startswith(("http://", "https://")):
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            host = parts.hostname or ""
            shown = f"{parts.scheme}://{host}{':' + str(parts.port) if parts.port else ''}{parts.path}"
            raise UnsupportedURL(
                shown,
                f"credentials never go in a URL: put the token in ${TOKEN_ENV}, or in another variable "
                "named with token_env= (--token-env)",
            )
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number in range
        except ValueError:
            raise UnsupportedURL(url, "its port is not a number from 1 to 65535") from None
        if not parts.hostname:
            raise UnsupportedURL(url, "it names no host (a hub is http(s)://host:port)")
        return "http"
    if lowered.startswith("s3://"):
        return "s3"
    if "://" in url and not lowered.startswith("file://"):
        raise UnsupportedURL(url, "use a path, file://, http(s)://, s3:// or a .tkvbundle file")
    if "\x00" in url:
        raise UnsupportedURL(url, "a path cannot hold a NUL character")
    from .bundle import SUFFIX, is_bundle
    from .path import path_of

    path = path_of(url)
    if path.endswith(SUFFIX) or is_bundle(path):
        return "bundle"
    return "path"


def open_remote(url: str, *, token_env: str | None = None) -> Remote:
    """A :class:`Remote` for ``url`` (imports a transport's optional dependencies only when used)."""
    kind = url_kind(url)
    if kind == "http":
        token = os.environ.get(token_env) if token_env else None
        variable = token_env if token or not os.environ.get(TOKEN_ENV) else TOKEN_ENV
        return _http_remote()(url, token=token or os.environ.get(TOKEN_ENV), token_env=variable or TOKEN_ENV)
    if kind == "s3":
        from .s3 import S3Remote

        return S3Remote(url)
    if kind == "bundle":
        from .bundle import BundleRemote
        from .path import path_of

        return BundleRemote(path_of(url))
    from .path import PathRemote

    return PathRemote(url)


def _http_remote() -> type[HttpRemote]:
    """The HTTP transport class; :class:`MissingTransportExtra` when httpx (the ``server`` extra) is not installed."""
    try:
        from .http_client import HttpRemote
    except ImportError as exc:
        raise MissingTransportExtra("http(s)://", "server", exc.name) from exc
    return HttpRemote


def open_named(store: Store, name: str) -> Remote:
    config = remote_config(store, name)
    return open_remote(config["url"], token_env=config.get("token_env"))


# --- operations ---------------------------------------------------------------------------------------------
