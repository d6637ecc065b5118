"""fsck: verify every object and reference in a store.

Checks, in one consistent read view:
    * every object's bytes hash to its id, decode strictly (canonical CBOR, known kind and fields);
    * every link resolves to a present object of the right kind (commit parents, edit targets and replies
      are commits; a commit's tools are a tool set; a tool set lists tool schemas; a usage record's
      commit and heads are commits and its children are usage records);
    * every ref names a present commit (a symbolic ref may point at a branch not yet born);
    * the secondary indexes agree with the objects (commit -> tool set, tool name -> versions).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import attrs

from tractkv.errors import CorruptObject, DecodeError
from tractkv.ids import ObjectId, hash_bytes, is_object_id, raw_to_oid
from tractkv.model import Commit, ToolSchema, ToolSet, UsageRecord, decode
from tractkv.store.base import SEQ, Reader, Store, Table


@attrs.frozen
class Problem:
    """One finding: what kind of problem, where (an id, a ref or an index key), and an explanation."""

    kind: str
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.where}: {self.detail}"


@attrs.frozen
class FsckReport:
    """The result of :func:`fsck`: counts by object kind and every problem found."""

    objects: int
    kinds: dict[str, int]
    refs: int
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


_LINK_KINDS = {"parent": "commit", "edit_target": "commit", "reply_to": "commit", "tools": "toolset"}


def _commit_links(commit: Commit) -> Iterator[tuple[str, ObjectId, str | None]]:
    for parent in commit.parents:
        yield "parent", parent, "commit"
    if commit.content is not None:
        yield "content", commit.content, None
    if commit.tools is not None:
        yield "tools", commit.tools, "toolset"
    if commit.edit_target is not None:
        yield "edit_target", commit.edit_target, "commit"
    if commit.reply_to is not None:
        yield "reply_to", commit.reply_to, "commit"
    for name, oids in commit.links.items():
        want = "usage" if name == "usages" else None  # a tool result links its tool-usage records
        for oid in oids:
            yield f"links.{name}", oid, want


def fsck(store: Store) -> FsckReport:
    """Check a whole store and report every problem (an empty report means the store is sound)."""
    problems: list[Problem] = []
    kinds: dict[str, str] = {}
    links: list[tuple[ObjectId, str, ObjectId, str | None]] = []
    tools_and_parent: dict[ObjectId, tuple[ObjectId | None, ObjectId | None]] = {}
    tool_names: dict[ObjectId, str] = {}
    with store.snapshot() as snap:
        for oid, data in snap.iter_raw_objects():
            actual = hash_bytes(data)
            if actual != oid:
                problems.append(Problem("corrupt", oid, str(CorruptObject(oid, actual))))
                continue
            try:
                obj = decode(data, strict=True)
            except DecodeError as exc:
                problems.append(Problem("undecodable", oid, exc.reason))
                continue
            kinds[oid] = obj.KIND
            if isinstance(obj, Commit):
                links.extend((oid, name, target, kind) for name, target, kind in _commit_links(obj))
                tools_and_parent[oid] = (obj.tools, obj.parents[0] if obj.parents else None)
            elif isinstance(obj, ToolSet):
                links.extend((oid, f"tools[{i}]", t, "tool") for i, t in enumerate(obj.tools))
            elif isinstance(obj, ToolSchema):
                tool_names[oid] = obj.name
            elif isinstance(obj, UsageRecord):
                if obj.commit is not None:
                    links.append((oid, "commit", obj.commit, "commit"))
                links.extend((oid, f"children[{i}]", c, "usage") for i, c in enumerate(obj.children))
                links.extend((oid, f"heads[{i}]", c, "commit") for i, c in enumerate(obj.heads))
        for source, name, target, want in links:
            found = kinds.get(target)
            if found is None:
                problems.append(Problem("missing", source, f"{name} -> {target} is not in the store"))
            elif want is not None and found != want:
                problems.append(
                    Problem("wrong-kind", source, f"{name} -> {target} is a {found}, not a {want}")
                )
        ref_count = _check_refs(snap, kinds, problems)
        # the commit_tools index holds the commits whose tool set differs from their first parent's
        commit_tools = {
            oid: tools
            for oid, (tools, parent) in tools_and_parent.items()
            if tools is not None
            and tools != (tools_and_parent.get(parent, (None, None))[0] if parent else None)
        }
        _check_indexes(snap, commit_tools, tool_names, problems)
    counts = Counter(kinds.values())
    return FsckReport(
        objects=len(kinds) + sum(1 for p in problems if p.kind in ("corrupt", "undecodable")),
        kinds=dict(sorted(counts.items())),
        refs=ref_count,
        problems=tuple(problems),
    )


def _check_refs(snap: Reader, kinds: dict[str, str], problems: list[Problem]) -> int:
    refs = dict(snap.iter_refs())
    for name, value in refs.items():
        if value.startswith("ref: "):
            continue  # symbolic (HEAD -> a branch): an unborn branch is legitimate
        if not is_object_id(value):
            problems.append(Problem("bad-ref", name, f"value {value!r} is not an object id"))
        elif value not in kinds:
            problems.append(Problem("missing", name, f"ref target {value} is not in the store"))
        elif kinds[value] != "commit" and not (kinds[value] == "tag" and name.startswith("refs/tags/")):
            problems.append(
                Problem(
                    "wrong-kind",
                    name,
                    f"ref target {value} is a {kinds[value]}, not a commit (or a tag's tag)",
                )
            )
    return len(refs)


def _check_indexes(
    snap: Reader,
    commit_tools: dict[ObjectId, ObjectId],
    tool_names: dict[ObjectId, str],
    problems: list[Problem],
) -> None:
    indexed = {raw_to_oid(k): raw_to_oid(v) for k, v in snap.table_iter(Table.COMMIT_TOOLS)}
    for commit_id, toolset in commit_tools.items():
        if indexed.get(commit_id) == toolset:
            continue
        if indexed.get(commit_id) != toolset:
            problems.append(
                Problem("index", commit_id, f"commit_tools row missing or wrong (want {toolset})")
            )
    for commit_id in indexed.keys() - commit_tools.keys():
        problems.append(
            Problem("index", commit_id, "commit_tools row for a commit that does not change tools")
        )
    seen: set[ObjectId] = set()
    for key, value in snap.table_iter(Table.TOOL_VERSIONS):
        oid = raw_to_oid(value)
        name = key[: -(SEQ.size + 1)].decode()
        if tool_names.get(oid) != name:
            problems.append(
                Problem("index", name, f"tool_versions row names {oid}, not a schema of that name")
            )
        seen.add(oid)
    for oid in tool_names.keys() - seen:
        problems.append(Problem("index", oid, f"tool schema {tool_names[oid]!r} missing from tool_versions"))
