"""The content classes: conveniences for a commit's content, each normalizing to the payload dict
:mod:`tractkv.engine.content.payload` documents (``t.commit(InstructionContent("Be brief."))``).

Loaded on first use (``tractkv.InstructionContent``, ``from tractkv.engine.content.payload import DialogueContent``):
``import tractkv`` does not build their attrs classes.
"""

from __future__ import annotations

from typing import Any

import attrs

from tractkv.engine.content.payload import _ContentBase


@attrs.frozen
class InstructionContent(_ContentBase):
    """A system instruction."""

    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"type": "instruction", "text": self.text}


@attrs.frozen
class DialogueContent(_ContentBase):
    """A user, assistant or tool message."""

    role: str
    text: str
    name: str | None = None

    def to_payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "dialogue", "role": self.role, "text": self.text}
        if self.name is not None:
            out["name"] = self.name
        return out


@attrs.frozen
class ReasoningContent(_ContentBase):
    """A model's reasoning trace (compiled only with ``include_reasoning=True``)."""

    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"type": "reasoning", "text": self.text}


@attrs.frozen
class ArtifactContent(_ContentBase):
    """A document, code or file shown to the model."""

    text: str
    artifact_type: str = "text"
    role: str = "user"

    def to_payload(self) -> dict[str, Any]:
        return {"type": "artifact", "text": self.text, "artifact_type": self.artifact_type, "role": self.role}


@attrs.frozen
class FreeformContent(_ContentBase):
    """Any JSON-like payload, shown to the model as compact JSON."""

    payload: Any
    role: str = "user"

    def to_payload(self) -> dict[str, Any]:
        return {"type": "freeform", "payload": self.payload, "role": self.role}
