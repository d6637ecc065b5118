"""The session: one handle's HEAD, the compile state kept for it, its reads, and the one write path.

``core`` (HEAD, resolve, reads, the write policies' registry), ``moves`` (switch, checkout, reset, a
fast-forward), ``write`` (``batch``, ``commit_with``, ``stage_commit``: the one function that stages every
commit, ``commit_content``, ``annotate``), ``fastpath`` (the plain-text append, all of it), ``policy`` (the
:class:`WritePolicy` protocol) and ``values`` (:class:`Tip` and the write path's callables).

``append_text`` is the one place that chooses how a plain-text append is made: :func:`append_text_fast`, with
:func:`append_text_general` beside it (the same signature and result; a property test runs both by name).
"""

from __future__ import annotations

from .core import SessionCore
from .fastpath import PLAIN_ROLES, append_text_fast
from .moves import SessionMoves
from .policy import Outcomes, WritePolicy
from .values import Build, Derive, Tip
from .write import BATCH_GC_THRESHOLD, MAX_REBASE_ATTEMPTS, Session, append_text_general, backoff, may_retry

append_text = append_text_fast
"""How a plain-text append is made: the one binding that chooses between :func:`append_text_fast` and
:func:`append_text_general`."""

__all__ = [
    "BATCH_GC_THRESHOLD",
    "MAX_REBASE_ATTEMPTS",
    "PLAIN_ROLES",
    "Build",
    "Derive",
    "Outcomes",
    "Session",
    "SessionCore",
    "SessionMoves",
    "Tip",
    "WritePolicy",
    "append_text",
    "append_text_fast",
    "append_text_general",
    "backoff",
    "may_retry",
]
