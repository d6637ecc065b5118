"""The values search and blame return (:mod:`tractkv.engine.search`, :mod:`tractkv.engine.blame`), apart from
:mod:`tractkv.engine.values.reports` so that a first search in a fresh process builds two attrs classes, not
every report's (~3 ms each)."""

from __future__ import annotations

from datetime import datetime

import attrs

from tractkv.ids import ObjectId


@attrs.frozen(kw_only=True)
class SearchHit:
    """One field of one commit matching a search (:func:`tractkv.engine.search.search`).

    ``field`` is what matched: ``text`` (a message's text), ``tool_name`` / ``arguments`` (a tool call's name
    or its JSON arguments; ``tool`` names the call's tool), ``tool_result`` (a tool result's text), ``note``
    (the commit's note), ``metadata`` (its metadata as compact JSON), ``reason`` (an annotation's reason).
    ``snippet`` is the matching line (cut around the match), the match at ``snippet[start:end]``; ``offset``
    is where the match starts in the whole field."""

    commit_id: ObjectId
    operation: str
    role: str | None
    tool: str | None
    field: str
    snippet: str
    start: int
    end: int
    offset: int
    created_at: datetime

    @property
    def match(self) -> str:
        return self.snippet[self.start : self.end]


@attrs.frozen(kw_only=True)
class BlameEntry:
    """Where one message of a compiled context comes from (:func:`tractkv.engine.blame.blame`).

    ``commit_id`` is the commit that wrote the message (its origin: an append, or the compress commit of a
    summary); ``shown`` the commit whose content compile shows (its latest edit, else the origin); ``edits``,
    ``annotations`` the commits that edited or annotated it, oldest first; ``compressed`` the messages a
    summary replaced; ``placeholder``: a result compile made for an unanswered call (its origin is the call's
    commit)."""

    index: int
    commit_id: ObjectId
    role: str
    operation: str
    shown: ObjectId
    edits: tuple[ObjectId, ...] = ()
    annotations: tuple[ObjectId, ...] = ()
    compressed: tuple[ObjectId, ...] = ()
    placeholder: bool = False
    created_at: datetime | None = None
