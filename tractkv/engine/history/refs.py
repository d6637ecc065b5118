"""Branch and ref naming, HEAD, and revision syntax.

Layout (as in git): branches are ``refs/heads/<name>`` (slashes allowed: ``agents/a17/main``),
remote-tracking branches ``refs/remotes/<remote>/<name>``, and ``HEAD`` is either ``ref: refs/heads/<name>``
(on a branch, possibly not born yet) or a commit id (detached, read-only).

Tags are ``refs/tags/<name>`` (a branch name's rules): a lightweight tag's ref holds a commit id, an annotated
tag's the id of a ``tag`` object (:class:`tractkv.model.Tag`) naming the commit; a revision naming either means
the commit (the tag is "peeled").

Revisions accepted wherever a commit is named: a full id (a tag object's id means its commit), a unique id
prefix (4+ hex digits), a branch name, a tag name (a name that is both a branch and a tag is refused as
ambiguous: say ``refs/heads/<name>`` or ``refs/tags/<name>``; git warns and takes the tag),
``<remote>/<branch>``, ``HEAD``, a reflog revision ``<branch>@{N}`` (the value the branch had N moves ago, as
its reflog records them: ``main@{0}`` is its tip, ``main@{1}`` the tip before its last move; ``HEAD@{N}`` and
``@{N}`` mean the current branch's), and any of those followed by ``~N`` (N first parents back) or ``^`` (first
parent) / ``^2`` (second parent of a merge).
"""

from __future__ import annotations

import re

from tractkv.engine.history.reflog import iter_reflog
from tractkv.errors import InvalidRefName, UnknownRevision
from tractkv.ids import ObjectId, is_object_id, is_oid_prefix
from tractkv.model import Commit, Tag
from tractkv.store import Reader

HEAD = "HEAD"
HEADS = "refs/heads/"
REMOTES = "refs/remotes/"
TAGS = "refs/tags/"
SYMBOLIC = "ref: "

_BAD_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_SUFFIX = re.compile(r"^(.*?)((?:~\d*|\^\d*)*)$")
_REFLOG = re.compile(r"^(.*)@\{(\d+)\}$")


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


def tag_ref(name: str) -> str:
    """The full ref of a tag name (a branch name's rules: :func:`check_branch_name`)."""
    return TAGS + check_branch_name(name)


def peel(reader: Reader, oid: ObjectId) -> ObjectId | None:
    """The commit ``oid`` names: itself when it is a commit, an annotated tag's target; None otherwise."""
    obj = reader.get(oid)
    if isinstance(obj, Tag):
        target = obj.target
        return target if isinstance(reader.get(target), Commit) else None
    return oid if isinstance(obj, Commit) else None


def tag_tips(reader: Reader) -> list[tuple[str, ObjectId]]:
    """Every tag ref with the commit it names (an annotated tag peeled), as ``log --decorate`` shows them; a
    tag naming no commit is left out."""
    out = []
    for ref, value in reader.iter_refs(TAGS):
        commit = peel(reader, ObjectId(value)) if is_object_id(value) else None
        if commit is not None:
            out.append((ref, commit))
    return out


def branch_name(ref: str) -> str | None:
    """The branch name of a ``refs/heads/`` ref, or None."""
    return ref[len(HEADS) :] if ref.startswith(HEADS) else None


def short_ref(name: str) -> str:
    """A ref as people name it: ``refs/heads/main`` -> ``main``, ``refs/remotes/origin/main`` ->
    ``origin/main``, ``refs/tags/v1`` -> ``v1``; anything else unchanged."""
    for prefix in (HEADS, REMOTES, TAGS):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


_STORED_HEAD = object()  # resolve ``HEAD`` through the store's HEAD ref


def resolve_revision(
    reader: Reader, rev: str, *, head: object = _STORED_HEAD, head_ref: object = _STORED_HEAD
) -> ObjectId:
    """The commit a revision names (see module doc). ``head`` is the commit ``HEAD`` names for the caller (a
    session's own HEAD, or None when its branch is unborn) and ``head_ref`` its branch ref (None: detached),
    for ``HEAD@{N}``; by default the store's HEAD ref says.

    Raises:
        UnknownRevision: nothing matches, the prefix is ambiguous, or ``~N`` walks past the root.
    """
    if not isinstance(rev, str) or not rev:
        raise UnknownRevision(str(rev), "empty")
    match = _SUFFIX.match(rev)
    base, suffix = (match.group(1), match.group(2)) if match else (rev, "")
    reflog = _REFLOG.match(base or rev)
    if reflog is not None:
        oid = _resolve_reflog(reader, base or rev, reflog.group(1), int(reflog.group(2)), head_ref)
    else:
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


def _resolve_reflog(reader: Reader, rev: str, name: str, n: int, head_ref: object) -> ObjectId:
    """``<name>@{n}``: the value branch ``name`` (``HEAD`` or empty: the current branch) had ``n`` moves ago."""
    if name in ("", HEAD):
        ref = read_head(reader)[0] if head_ref is _STORED_HEAD else head_ref
        if ref is None:
            raise UnknownRevision(
                rev, "HEAD is detached, so it has no branch reflog: name a branch (main@{1})"
            )
    elif name.startswith("refs/"):
        ref = name
    elif reader.get_ref(HEADS + name) is None and reader.get_ref(REMOTES + name) is not None:
        ref = REMOTES + name
    else:
        ref = HEADS + name
    assert isinstance(ref, str)
    seen = 0
    for entry in iter_reflog(reader, ref):
        if seen == n:
            if entry.new is None:
                raise UnknownRevision(rev, f"{ref} was deleted then")
            return entry.new
        seen += 1
    if seen == 0:
        raise UnknownRevision(rev, f"{ref} has no reflog")
    raise UnknownRevision(rev, f"the reflog of {ref} has {seen} entries: @{{0}} to @{{{seen - 1}}}")


def _resolve_base(reader: Reader, base: str, head: object) -> ObjectId:
    if base == HEAD:
        oid = head_commit(reader) if head is _STORED_HEAD else head
        if oid is None:
            raise UnknownRevision(base, "HEAD points at a branch with no commits yet")
        return ObjectId(str(oid))
    if is_object_id(base):
        peeled = peel(reader, ObjectId(base))
        if peeled is None:
            raise UnknownRevision(base, "no commit with that id")
        return peeled
    branch = reader.get_ref(HEADS + base)
    tag = None if base.startswith("refs/") else reader.get_ref(TAGS + base)
    if branch is not None and tag is not None:
        raise UnknownRevision(base, f"ambiguous: both a branch and a tag; say {HEADS}{base} or {TAGS}{base}")
    candidates = (
        (branch, False),
        (tag, True),
        (reader.get_ref(REMOTES + base), False),
        (reader.get_ref(base) if base.startswith("refs/") else None, base.startswith(TAGS)),
    )
    for value, is_tag in candidates:
        if value is not None and is_object_id(value):
            return (peel(reader, ObjectId(value)) if is_tag else None) or ObjectId(value)
    if is_oid_prefix(base):
        found = reader.resolve_prefix(base, kind=Commit.KIND) or reader.resolve_prefix(base, kind=Tag.KIND)
        if len(found) == 1:
            return peel(reader, found[0]) or found[0]
        if len(found) > 1:
            raise UnknownRevision(base, "ambiguous id prefix; give more digits")
    raise UnknownRevision(base)


def read_head(reader: Reader) -> tuple[str | None, ObjectId | None]:
    """(branch ref or None when detached, commit id or None when the branch is unborn)."""
    value = reader.get_ref(HEAD)
    if value is None:  # a store made by init and only pushed to: HEAD is main's tip
        target = reader.get_ref(HEADS + "main")
        return HEADS + "main", (ObjectId(target) if target is not None else None)
    if value.startswith(SYMBOLIC):
        ref = value[len(SYMBOLIC) :]
        target = reader.get_ref(ref)
        return ref, (ObjectId(target) if target is not None else None)
    return None, ObjectId(value)


def head_commit(reader: Reader) -> ObjectId | None:
    """The commit HEAD points at, or None on an unborn branch."""
    return read_head(reader)[1]
