"""Branch and ref naming, HEAD, and revision syntax.

Layout (as in git): branches are ``refs/heads/<name>`` (slashes allowed: ``agents/a17/main``),
remote-tracking branches ``refs/remotes/<remote>/<name>``, and ``HEAD`` is either ``ref: refs/heads/<name>``
(on a branch, possibly not born yet) or a commit id (detached, read-only).

Revisions accepted wherever a commit is named: a full id, a unique id prefix (4+ hex digits), a branch name,
``<remote>/<branch>``, ``HEAD``, and any of those followed by ``~N`` (N first parents back) or ``^``
(first parent) / ``^2`` (second parent of a merge).
"""

from __future__ import annotations

import re

from tractkv.errors import InvalidRefName, UnknownRevision
from tractkv.ids import ObjectId, is_object_id, is_oid_prefix
from tractkv.model import Commit
from tractkv.store import Reader

HEAD = "HEAD"
HEADS = "refs/heads/"
REMOTES = "refs/remotes/"
SYMBOLIC = "ref: "

_BAD_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_SUFFIX = re.compile(r"^(.*?)((?:~\d*|\^\d*)*)$")


def check_branch_name(name: str) -> str:
    """Validate a branch name with git's rules (slashes allowed). Returns it unchanged.

    Raises:
        InvalidRefName: empty, ``HEAD``, has spaces, control characters, ``~^:?*[\\``, ``..``, ``@{``,
            ``//``, a leading or trailing ``/`` or ``.``, a component starting with ``.``, or ends ``.lock``.
    """
    if not isinstance(name, str) or not name:
        raise InvalidRefName(str(name), "empty")
    reasons = [
        (name == HEAD, "HEAD is reserved"),
        (_BAD_CHARS.search(name) is not None, "spaces, control characters and ~^:?*[\\ are not allowed"),
        (".." in name, "'..' is not allowed"),
        ("@{" in name, "'@{' is not allowed"),
        ("//" in name, "empty path component"),
        (name.startswith("/") or name.endswith("/"), "leading or trailing '/'"),
        (name.endswith((".", ".lock")), "may not end with '.' or '.lock'"),
        (any(part.startswith(".") for part in name.split("/")), "a component may not start with '.'"),
        (name.startswith("-"), "may not start with '-'"),
        (len(name.encode()) > 400, "longer than 400 bytes"),
    ]
    for bad, reason in reasons:
        if bad:
            raise InvalidRefName(name, reason)
    return name


def branch_ref(name: str) -> str:
    """The full ref of a branch name."""
    return HEADS + check_branch_name(name)


def branch_name(ref: str) -> str | None:
    """The branch name of a ``refs/heads/`` ref, or None."""
    return ref[len(HEADS) :] if ref.startswith(HEADS) else None


_STORED_HEAD = object()  # resolve ``HEAD`` through the store's HEAD ref


def resolve_revision(reader: Reader, rev: str, *, head: object = _STORED_HEAD) -> ObjectId:
    """The commit a revision names (see module doc). ``head`` is the commit ``HEAD`` names for the caller (a
    session's own HEAD, or None when its branch is unborn); by default the store's HEAD ref says.

    Raises:
        UnknownRevision: nothing matches, the prefix is ambiguous, or ``~N`` walks past the root.
    """
    if not isinstance(rev, str) or not rev:
        raise UnknownRevision(str(rev), "empty")
    match = _SUFFIX.match(rev)
    base, suffix = (match.group(1), match.group(2)) if match else (rev, "")
    oid = _resolve_base(reader, base or rev, head)
    for step in re.findall(r"~\d*|\^\d*", suffix):
        count = int(step[1:] or 1)
        if step[0] == "~":
            for _ in range(count):
                oid = _parent(reader, oid, 0, rev)
        else:
            oid = _parent(reader, oid, count - 1, rev) if count else oid
    return oid


def _parent(reader: Reader, oid: ObjectId, index: int, rev: str) -> ObjectId:
    commit = reader.get(oid)
    if not isinstance(commit, Commit) or len(commit.parents) <= index:
        raise UnknownRevision(rev, f"{oid[:12]} has no parent #{index + 1}")
    return commit.parents[index]


def _resolve_base(reader: Reader, base: str, head: object) -> ObjectId:
    if base == HEAD:
        oid = head_commit(reader) if head is _STORED_HEAD else head
        if oid is None:
            raise UnknownRevision(base, "HEAD points at a branch with no commits yet")
        return ObjectId(str(oid))
    if is_object_id(base):
        if not isinstance(reader.get(ObjectId(base)), Commit):
            raise UnknownRevision(base, "no commit with that id")
        return ObjectId(base)
    for ref in (HEADS + base, REMOTES + base, base if base.startswith("refs/") else None):
        if ref is None:
            continue
        value = reader.get_ref(ref)
        if value is not None and is_object_id(value):
            return ObjectId(value)
    if is_oid_prefix(base):
        found = reader.resolve_prefix(base, kind=Commit.KIND)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise UnknownRevision(base, "ambiguous id prefix; give more digits")
    raise UnknownRevision(base)


def read_head(reader: Reader) -> tuple[str | None, ObjectId | None]:
    """(branch ref or None when detached, commit id or None when the branch is unborn)."""
    value = reader.get_ref(HEAD)
    if value is None:
        return HEADS + "main", None
    if value.startswith(SYMBOLIC):
        ref = value[len(SYMBOLIC) :]
        target = reader.get_ref(ref)
        return ref, (ObjectId(target) if target is not None else None)
    return None, ObjectId(value)


def head_commit(reader: Reader) -> ObjectId | None:
    """The commit HEAD points at, or None on an unborn branch."""
    return read_head(reader)[1]
