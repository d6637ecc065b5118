"""Tags as a session sees them: create, list, delete (git's ``tag``).

A tag is ``refs/tags/<name>`` (a branch name's rules). A lightweight tag's ref holds the commit's id; an
annotated tag's holds the id of a :class:`~tractkv.model.Tag` object (name, message, tagger time, target
commit), content-addressed and checked by the same validator a receiver applies
(:mod:`tractkv.engine.history.validate`). Tags never move: creating a tag whose name is taken is refused unless
``force``, and a name that is a branch too is refused (a revision naming it would be ambiguous). Creating,
moving and deleting a tag is one transaction with its reflog entry (``refs/tags/<name>``'s). Tags are refs, so
gc keeps what they reach; a sync sends them with ``push --tags`` and fetch brings them
(:mod:`tractkv.sync.transfer`).
"""

from __future__ import annotations

from tractkv.engine.history import HEADS, TAGS, check_tag, log_ref_move, peel, tag_ref
from tractkv.engine.session import Session
from tractkv.engine.values import TagInfo, timestamp
from tractkv.errors import InvalidInput, RefNotFound
from tractkv.ids import ObjectId, is_object_id
from tractkv.model import Tag
from tractkv.store import Reader


def tag_info(reader: Reader, name: str, value: str) -> TagInfo | None:
    """The tag ``name`` whose ref holds ``value``, or None when it names neither a commit nor a tag of one."""
    if not is_object_id(value):
        return None
    oid = ObjectId(value)
    obj = reader.get(oid)
    if isinstance(obj, Tag):
        commit = peel(reader, oid)
        if commit is None:
            return None
        return TagInfo(
            name=name, commit=commit, tag_id=oid, message=obj.message, created_at=timestamp(obj.created_at)
        )
    commit = peel(reader, oid)
    return None if commit is None else TagInfo(name=name, commit=commit)


def list_tags(session: Session) -> list[TagInfo]:
    """Every tag, by name."""
    reader = session.reader()
    found = (tag_info(reader, ref[len(TAGS) :], value) for ref, value in reader.iter_refs(TAGS))
    return [info for info in found if info is not None]


def create_tag(
    session: Session, name: str, rev: str | None = None, message: str | None = None, *, force: bool = False
) -> TagInfo:
    """Tag ``rev`` (default HEAD) as ``name``: annotated when ``message`` is given (a :class:`Tag` object),
    else lightweight. Refuses a taken name (unless ``force``: the tag moves, its reflog says from where), a
    name that is a branch too, and a revision that names no commit."""
    session.check_writes("tag", in_batch=False)
    ref = tag_ref(name)
    reader = session.reader()
    if reader.get_ref(HEADS + name) is not None:
        raise InvalidInput(f"{name!r} is a branch: a tag of that name would make the name ambiguous")
    current = reader.get_ref(ref)
    if current is not None and not force:
        raise InvalidInput(f"tag {name!r} exists already (move it with force=True, tag -f)")
    if rev is None:
        commit = session.head_commit(reader)
        if commit is None:
            raise InvalidInput(f"cannot tag {session.where()}: it has no commits yet")
    else:
        commit = session.resolve(rev, reader)
    batch = session.store.new_batch()
    now = session.now(None)
    value = commit
    if message is not None:
        if not isinstance(message, str):
            raise InvalidInput(f"a tag's message must be text, not {type(message).__name__}")
        obj = Tag(target=commit, name=name, created_at=now, message=message)
        check_tag(batch, obj, {commit: "commit"}, now)
        value = batch.put(obj)
    batch.set_ref(ref, value, expected=current)
    what = "tag -f" if current is not None else "tag"
    log_ref_move(
        batch,
        ref,
        ObjectId(current) if current else None,
        value,
        what,
        f"tag {name} at {commit[:12]}",
        now_us=now,
    )
    session.store.apply(batch)
    info = tag_info(session.store, name, value)
    assert info is not None
    return info


def delete_tag(session: Session, name: str) -> TagInfo:
    """Delete a tag; returns what it was (its reflog keeps it until gc; an annotated tag's object goes at the
    next gc that no ref, reflog entry or new-enough commit keeps)."""
    session.check_writes("delete_tag", in_batch=False)
    ref = tag_ref(name)
    reader = session.reader()
    value = reader.get_ref(ref)
    if value is None:
        raise RefNotFound(ref)
    info = tag_info(reader, name, value)
    batch = session.store.new_batch()
    batch.set_ref(ref, None, expected=value)
    log_ref_move(batch, ref, ObjectId(value), None, "delete", f"deleted tag {name}", now_us=session.clock())
    session.store.apply(batch)
    if info is None:
        raise InvalidInput(f"tag {name!r} named no commit; it was deleted")
    return info
