"""The context engine: content, compile, history, branches, merge, reset, gc (used through Tract).

Its face, for code outside the engine: :func:`open_session`, the one way a session is made (the facade, the
viewer and the integrations open theirs here, never by constructing ``Session`` themselves).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tractkv.engine.session import Session
    from tractkv.store import Store


def open_session(store: Store, **kwargs: Any) -> Session:
    """A session on ``store``, with its default policies. ``kwargs`` are the session's settings: ``counter``,
    ``clock``, ``branch``, ``rebase_appends``, ``readonly`` (see :class:`~tractkv.engine.session.Session`)."""
    from tractkv.engine.session import Session

    return Session(store, **kwargs)


__all__ = ["open_session"]
