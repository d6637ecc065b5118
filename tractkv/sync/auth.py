"""Bearer tokens and scopes for the HTTP hub.

A tokens file is JSON: ``{"tokens": {"<token>": ["read", "write:agents/edge-7/*"], ...}}``. Scopes:

``read``
    list every branch and fetch objects.
``write:<glob>``
    push to branches whose name matches the glob (``fnmatch``, case-sensitive; ``*`` crosses ``/``), and to
    tags whose ``tags/<name>`` matches it. A token with only write scopes sees only the branches and tags it
    may write, so an edge agent can be confined to its own namespace without reading anyone else's
    sessions.
``admin``
    everything.

A request without a known token gets 401, one whose token lacks the scope gets 403. Tokens are compared in
constant time against every configured token (SHA-256 digests, ``hmac.compare_digest``), so the time to
answer says nothing about how much of a guess matched.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase

import attrs

from tractkv.errors import AuthError, InvalidInput

SCOPES = ("read", "admin")
WRITE_PREFIX = "write:"


def check_scope(scope: str) -> str:
    if scope in SCOPES or (scope.startswith(WRITE_PREFIX) and len(scope) > len(WRITE_PREFIX)):
        return scope
    raise InvalidInput(f"unknown scope {scope!r}: use read, admin or write:<branch glob>")


@attrs.frozen
class Grant:
    """What one authenticated request may do. ``who`` names the token it came from (a short digest of it,
    never the token itself; empty for :data:`OPEN`): the party a hub's per-party limits count against.
    Grants compare by their scopes alone."""

    scopes: tuple[str, ...]
    who: str = attrs.field(default="", eq=False)

    @property
    def can_read(self) -> bool:
        return "read" in self.scopes or "admin" in self.scopes

    def may_write(self, ref: str) -> bool:
        """May these credentials move ``ref`` (a full ``refs/heads/...`` or ``refs/tags/...`` name)? A branch
        is matched by its name, a tag as ``tags/<name>`` (so ``write:*`` covers tags, ``write:tags/v*``
        grants only release tags, and ``write:agents/a17/*`` none)."""
        if "admin" in self.scopes:
            return True
        name = ref[len("refs/heads/") :] if ref.startswith("refs/heads/") else ref.removeprefix("refs/")
        return any(
            fnmatchcase(name, s[len(WRITE_PREFIX) :]) for s in self.scopes if s.startswith(WRITE_PREFIX)
        )

    def may_see(self, ref: str) -> bool:
        return self.can_read or self.may_write(ref)

    @property
    def can_push(self) -> bool:
        return "admin" in self.scopes or any(s.startswith(WRITE_PREFIX) for s in self.scopes)


#: The grant of a hub that runs without tokens (loopback only).
OPEN = Grant(scopes=("admin",))


class TokenTable:
    """Configured tokens; :meth:`authenticate` turns an ``Authorization`` header into a :class:`Grant`."""

    def __init__(self, tokens: Mapping[str, Sequence[str]]) -> None:
        if not tokens:
            raise InvalidInput("a tokens file must define at least one token")
        self._entries: list[tuple[bytes, Grant]] = []
        for token, scopes in tokens.items():
            if not isinstance(token, str) or len(token) < 16:
                raise InvalidInput("every token must be a string of at least 16 characters")
            if isinstance(scopes, str) or not all(isinstance(s, str) for s in scopes):
                raise InvalidInput("a token's scopes must be a list of strings")
            digest = _digest(token)
            grant = Grant(scopes=tuple(check_scope(s) for s in scopes), who=digest.hex()[:16])
            self._entries.append((digest, grant))

    @classmethod
    def from_file(cls, path: str) -> TokenTable:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as exc:
            raise InvalidInput(f"cannot read tokens file {path!r}: {exc.strerror}") from exc
        except ValueError as exc:
            raise InvalidInput(f"tokens file {path!r} is not JSON: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("tokens"), dict):
            raise InvalidInput(f'tokens file {path!r} must be {{"tokens": {{"<token>": ["<scope>", ...]}}}}')
        return cls(data["tokens"])

    def authenticate(self, header: str | None) -> Grant:
        """The grant of a ``Bearer`` header; :class:`AuthError` 401 when absent, malformed or unknown."""
        if not header:
            raise AuthError(401, "send a bearer token (Authorization: Bearer ...)")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError(401, "only bearer tokens are accepted")
        digest = _digest(token.strip())
        found: Grant | None = None
        for known, grant in self._entries:  # no early exit: every request costs the same
            if hmac.compare_digest(known, digest):
                found = grant
        if found is None:
            raise AuthError(401, "unknown token")
        return found


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()
