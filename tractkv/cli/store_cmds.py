"""Store commands: init, fsck, cat-object, stats."""

from __future__ import annotations

import time

import click

from tractkv.cli.common import CliState, echo_json, json_option, note, resolve_oid, with_state
from tractkv.engine.compile import check_checkpoints, drop_checkpoints
from tractkv.engine.history import fsck_objects
from tractkv.model import decode, describe, kind_of
from tractkv.store import Table, fsck
from tractkv.store.base import clear_stale_gc_runs


@click.command()
@with_state
def init(st: CliState) -> None:
    """Create an empty store at --store (a no-op when one is there)."""
    store = st.store(create=True)
    note(f"tractkv store ready at {store.path}")


@click.command("fsck")
@click.option(
    "--repair",
    is_flag=True,
    help="Drop damaged compile checkpoints (a cache) and records of a gc that crashed; nothing else changes.",
)
@json_option
@with_state
def fsck_cmd(st: CliState, repair: bool, as_json: bool) -> None:
    """Rehash every object, check every reference, every object's semantic rules (link kinds, content a
    commit compiles, timestamps), every compile checkpoint and every spawn relation row; exit 1 when anything
    is wrong. A commit stamped more than a day past this machine's clock (a receiver would refuse it) is a
    warning, not an error: it is a valid object, and compile reads it as any other.

    With --repair, damaged checkpoint, relation and search index rows are deleted in one transaction (compile
    rebuilds them from objects); problems with objects, refs or indexes are only reported.
    """
    from tractkv.engine.search import check_index  # lazy: the search index module

    store = st.store()
    report = fsck(store)
    found = fsck_objects(store, now_us=time.time_ns() // 1000)
    # warnings: valid objects from a clock ahead of this one
    future = [p for p in found if p.kind == "future"]
    invalid = [p for p in found if p.kind != "future"]
    checkpoints = check_checkpoints(store)
    index_problems, index_damaged, index_rows = check_index(store)
    dropped = drop_checkpoints(store, [*checkpoints.damaged, *index_damaged]) if repair else 0
    stale_gc = clear_stale_gc_runs(store) if repair else 0  # records of gcs that crashed (writers stop)
    derived_problems = [*checkpoints.problems, *index_problems]
    problems = list(report.problems) + invalid + ([] if dropped else derived_problems)
    if as_json:
        echo_json(
            {
                "ok": not problems,
                "future": [{"where": p.where, "detail": p.detail} for p in future],
                "objects": report.objects,
                "kinds": report.kinds,
                "refs": report.refs,
                "checkpoints": checkpoints.records,
                "chunks": checkpoints.chunks,
                "stale_checkpoint_rows": checkpoints.stale,
                "relation_rows": checkpoints.relations,
                "search_index_rows": index_rows,
                "problems": [{"kind": p.kind, "where": p.where, "detail": p.detail} for p in problems],
                "dropped": [p.where for p in derived_problems] if dropped else [],
            }
        )
    else:
        for problem in problems:
            click.echo(str(problem))
        for problem in future:
            click.echo(f"warning: {problem}")
        if dropped:
            for problem in derived_problems:
                click.echo(f"dropped {problem.where}: {problem.detail}")
        kinds = ", ".join(f"{n} {k}" for k, n in report.kinds.items()) or "no objects"
        note(
            f"checked {report.objects} objects ({kinds}), {report.refs} refs and {checkpoints.records} "
            f"checkpoints ({checkpoints.chunks} chunks, {checkpoints.relations} relation rows, "
            f"{index_rows} search index rows): "
            + ("ok" if not problems else f"{len(problems)} problem(s)")
            + (f"; dropped {dropped} damaged checkpoint row(s)" if dropped else "")
            + (f"; dropped {stale_gc} record(s) of a gc that did not finish" if stale_gc else "")
            + (
                f"; {checkpoints.stale} row(s) of an older checkpoint format (gc drops them)"
                if checkpoints.stale
                else ""
            )
        )
    if problems:
        raise SystemExit(1)


@click.command("cat-object")
@click.argument("oid")
@json_option
@with_state
def cat_object(st: CliState, oid: str, as_json: bool) -> None:
    """Print one object, decoded (OID may be a unique prefix of 4+ hex digits). Times (created_at, started_at,
    completed_at) print as ISO-8601 UTC; --json keeps the stored µs and adds the text as <field>_utc."""
    store = st.store()
    full = resolve_oid(store, oid)
    data = store.get_raw(full)
    if data is None:  # resolve_oid found it a moment ago; another process may have gc'd it
        from tractkv.errors import ObjectNotFound

        raise ObjectNotFound(full)
    described = {"id": full, "size": len(data), **describe(decode(data, full))}
    times = {key: _utc(value) for key, value in described.items() if key in TIME_FIELDS and value is not None}
    if as_json:  # the stored integer as it is, and beside it the same instant as ISO-8601 UTC text
        echo_json({**described, **{f"{key}_utc": text for key, text in times.items()}})
        return
    click.echo(f"{described.pop('kind')} {described.pop('id')} ({described.pop('size')} bytes)")
    for key, value in described.items():
        if value in (None, (), [], {}):
            continue
        click.echo(f"{key}: {times.get(key, value)}")


TIME_FIELDS = ("created_at", "started_at", "completed_at")  # stored as µs since the epoch (UTC)


def _utc(micros: int) -> str:
    """A stored time (µs since the epoch) as ISO-8601 UTC text with a ``Z``: ``2026-11-28T13:27:22.580860Z``."""
    from tractkv.engine.values import timestamp

    try:
        return timestamp(micros).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):  # a time no datetime holds: show the number
        return str(micros)


@click.command()
@json_option
@with_state
def stats(st: CliState, as_json: bool) -> None:
    """Counts and sizes: objects by kind, refs, index rows, bytes on disk."""
    store = st.store()
    kinds: dict[str, int] = {}
    total_bytes = 0
    with store.snapshot() as snap:
        for _, data in snap.iter_raw_objects():
            kind = kind_of(data)
            kinds[kind] = kinds.get(kind, 0) + 1
            total_bytes += len(data)
    out = {
        "path": store.path,
        "format": store.format_version(),
        "durable": store.durable,
        "objects": sum(kinds.values()),
        "kinds": dict(sorted(kinds.items())),
        "object_bytes": total_bytes,
        "refs": store.table_count(Table.REFS),
        "reflog_entries": store.table_count(Table.REFLOG),
        "size_bytes": store.size_bytes(),
    }
    if as_json:
        echo_json(out)
        return
    for key, value in out.items():
        click.echo(f"{key}: {value}")
