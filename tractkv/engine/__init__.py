"""The context engine: content, compile, history, sessions and the operations on them (used through Tract).

Concept subpackages, bottom to top (each imports only its own sub-layer and lower ones; docs/ARCHITECTURE.md
draws them and tests/test_layers.py checks them): ``content``, ``values``, ``history``, ``compile``, then the
session (``session``), ``usage``, ``tools``, and the operations, each a function of a session (``budget``,
``calibration``, ``merging``, ``branches``, ``tags``, ``picking``, ``gc``, ``spawning``, ``fitting``). Code
outside a subpackage imports its face (``from tractkv.engine.compile import CompileState``), never a submodule.

This face is how layers above the engine that do not hold a ``Tract`` (the viewer, the integrations) open a
session of their own: :func:`open_session`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tractkv.engine.content import TokenCounter
    from tractkv.engine.session import Session, WritePolicy
    from tractkv.store import Store


def open_session(
    store: Store,
    *,
    counter: TokenCounter | None = None,
    clock: Callable[[], int] | None = None,
    branch: str | None = None,
    rebase_appends: bool = False,
    readonly: bool = False,
    policies: Sequence[WritePolicy[Any]] | None = None,
) -> Session:
    """A session on ``store`` (see :class:`tractkv.engine.session.Session` for the arguments) with its write
    policies: ``policies``, or by default the branch budget (:class:`tractkv.engine.budget.BudgetPolicy`, with
    no summarizer and no listener); the one way code above the engine opens one."""
    from tractkv.engine.session import Session  # lazy: `import tractkv.engine.x` must not load the session

    if policies is None:
        from tractkv.engine.budget import BudgetPolicy

        policies = (BudgetPolicy(),)
    return Session(
        store,
        counter=counter,
        clock=clock,
        branch=branch,
        rebase_appends=rebase_appends,
        readonly=readonly,
        policies=policies,
    )


__all__ = ["open_session"]
