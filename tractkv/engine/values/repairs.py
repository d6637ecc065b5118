"""The repairs compile makes so that tool calls and results pair up (:mod:`tractkv.engine.compile.pairing`).

Apart from :mod:`~tractkv.engine.values.records` so that building the class is paid by the first history
that needs a repair, not by ``import tractkv``.
"""

from __future__ import annotations

import attrs

from tractkv.ids import ObjectId


@attrs.frozen(kw_only=True)
class Repair:
    """One repair compile made so that tool calls and results pair up (:mod:`tractkv.engine.compile.pairing`).

    Attributes:
        kind: ``placeholder_result`` (an unanswered call got a placeholder error result) or
            ``dropped_result`` (a result answering no open call was left out); ``dropped_item`` (an OpenAI
            Responses provider item a dialect has no form for, or cannot send alone: :meth:`CompiledContext.left_out`,
            not compile); ``invalid_arguments`` (a tool call whose arguments are not a JSON object, sent with
            ``{}`` to a dialect that needs one: also ``left_out``).
        commit_id: the dropped result's commit, or the commit of the message that made the call.
        call_id: the tool call id concerned.
        detail: one sentence for people.
    """

    kind: str
    commit_id: ObjectId
    call_id: str
    detail: str

    def __str__(self) -> str:
        return self.detail
