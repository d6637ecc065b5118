"""A session's moves: HEAD to a branch or a commit, and a branch to a commit that exists (a reset, a
fast-forward), checked by the write policies in the move's transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tractkv.engine.history import (
    branch_ref,
    log_ref_move,
)
from tractkv.errors import (
    BranchNotFound,
    InvalidInput,
)
from tractkv.ids import ObjectId

from .core import SessionCore
from .values import Tip

if TYPE_CHECKING:  # loaded on first use: keeps `import tractkv` light
    from tractkv.engine.values import BranchInfo


class SessionMoves(SessionCore):
    """A session's moves of HEAD (switch, checkout, place) and of its branch to a commit that exists (reset,
    a fast-forward: :meth:`move_branch`, which its write policies check as they check a commit)."""

    def switch(self, name: str) -> BranchInfo:
        """Make ``name`` this session's branch (and, unless read-only, the store's HEAD for the next open)."""
        if self._batch is not None:
            raise InvalidInput("switch is not allowed inside batch()")
        self.guard("switch")
        ref = branch_ref(name)
        head = self.store.get_ref(ref)
        if head is None and ref != self.branch_ref:
            raise BranchNotFound(name)
        self._move_head(ref, None)
        from tractkv.engine.values import BranchInfo  # lazy: keeps `import tractkv` light

        return BranchInfo(name=name, head=ObjectId(head) if head else None, is_current=True)

    def checkout(self, rev: str) -> ObjectId:
        """Detach HEAD at a commit (read-only there)."""
        if self._batch is not None:
            raise InvalidInput("checkout is not allowed inside batch()")
        self.guard("checkout")
        oid = self.resolve(rev, self.store)
        self._move_head(None, oid)
        return oid

    def _move_head(self, ref: str | None, detached: ObjectId | None) -> None:
        self._forget_state()
        self.branch_ref, self.detached = ref, detached
        self._note_tip()
        if not self.readonly:
            self._save_head()

    def move_branch(
        self,
        tip: Tip,
        target: ObjectId,
        reflog_op: str,
        summary: str,
        *,
        hard: bool = False,
        moved: str = "the move",
        peer: bool = False,
    ) -> ObjectId | None:
        """Move the branch from ``tip`` (read when the operation started) to ``target`` by compare-and-swap
        (reset, fast-forward merge): if another handle moved it since, nothing moves. The branch's budget
        checks the move as it checks a commit (``moved`` names it in messages), in the same transaction: a
        ``trim`` / ``compress`` commit lands with the move, a refusal moves nothing. Returns the branch's new
        tip (``target``, or the commit the budget made on it); inside :meth:`batch`, the block's end checks.
        ``peer``: ``target`` came from another store (a pull), so the budget counts at least the estimate."""
        ref, head = tip.ref, tip.head
        own = self._batch is None
        batch = self.store.new_batch() if own else self._batch
        assert batch is not None
        batch.set_ref(ref, target, expected=head)
        log_ref_move(batch, ref, head, target, reflog_op, summary, hard=hard, now_us=self.clock())
        self._forget_state()
        if not own:
            return target
        try:
            outcomes = self.check_policies(batch, ref, None, moved=moved, peer=peer)
            self.apply_ref_batch(batch)
        except BaseException:
            self._state = None  # it may hold the budget's commit, which was not written
            raise
        self.compiler.retarget(batch, self.store)
        if self._state is not None:
            self._state.retarget(batch, self.store)
        staged = batch.ref_updates[ref][1]
        self._landed(outcomes)
        return ObjectId(staged) if staged is not None else None

    def reset(self, target: str, mode: str = "soft") -> ObjectId:
        if mode not in ("soft", "hard"):
            raise InvalidInput(f"mode must be 'soft' or 'hard', not {mode!r}")
        self.check_writes("reset", in_batch=False)
        tip = self.writable("reset")
        oid = self.resolve(target, self.store)
        if mode == "hard":
            self.render_live()  # the abandoned commits' blobs may go at the next gc
        self.move_branch(
            tip, oid, f"reset --{mode}", f"reset to {target}", hard=mode == "hard", moved="the reset"
        )
        return oid

    def place(self, ref: str | None, detached: ObjectId | None = None) -> None:
        """Put HEAD on ``ref`` (or detached) without checks: used right after a clone created the refs."""
        self._state = None
        self.branch_ref, self.detached = ref, detached
        self._note_tip()
        if not self.readonly:
            self._save_head()
