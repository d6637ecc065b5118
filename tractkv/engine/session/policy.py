"""Write policies: what a session consults when it writes (:class:`WritePolicy`), passed in, never set from
above. The session's registry of them is :class:`~tractkv.engine.session.core.SessionCore`'s."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from tractkv.engine.compile import CompileState
from tractkv.store import WriteBatch

S_contra = TypeVar("S_contra", contravariant=True)
"""The session a policy is consulted by (:class:`~tractkv.engine.session.Session`)."""


class WritePolicy(Protocol[S_contra]):
    """What a session consults when it writes: passed at construction (``Session(policies=...)``, which
    :func:`tractkv.engine.open_session` fills with the default ones) or registered with
    :meth:`Session.add_policy`; never an attribute set from above. A policy implements the hooks it needs
    (subclass this protocol to inherit the others, which do nothing):

    * :meth:`before_write`: before an operation moves the session's branch or HEAD (every commit, including
      each commit of a batch, a switch, a checkout, a reset, a merge); raising refuses it, nothing written.
    * :meth:`check`: once per transaction that moves branch ``ref``, before it is applied (a commit outside a
      batch, a batch's end, a ref move). May stage commits in ``batch`` (through :meth:`Session.stage_commit`,
      the one write function) or raise (nothing of the transaction is written); returns what
      :meth:`landed` receives once the transaction landed, or None.
    * :meth:`landed`: after the transaction landed, with what :meth:`check` returned (when not None).

    The branch budget (:class:`tractkv.engine.budget.BudgetPolicy`) is a policy; so is the toolkit's guard
    that refuses context changes while a tool call waits for its result. A policy names the session class it
    is written for (``WritePolicy[Session]``): this module sits below the session, which it never imports.
    """

    def before_write(self, session: S_contra, action: str) -> None:
        return None

    def check(
        self,
        session: S_contra,
        batch: WriteBatch,
        ref: str,
        state: CompileState | None,
        *,
        moved: str | None,
        peer: bool,
    ) -> object | None:
        return None

    def landed(self, session: S_contra, outcome: object) -> None:
        return None


Outcomes = tuple[tuple[WritePolicy[Any], object], ...]
"""What the policies' checks of one transaction returned, for their :meth:`WritePolicy.landed`."""


def overrides(policy: WritePolicy[Any], hook: str) -> bool:
    """Whether ``policy`` implements ``hook`` itself (not the protocol's default, which does nothing)."""
    return getattr(type(policy), hook, None) is not getattr(WritePolicy, hook)
