"""The tool-result pipeline: hooks, summarization, the result commit, and queries over tool turns.

A tool result is a dialogue message with role ``tool`` answering (``reply_to``) the assistant commit that
made the call. :meth:`ToolResults.commit_result` finds that call in HEAD's context, runs the ``tool_result``
hooks (:mod:`tractkv.engine.hooks`) or the automatic summarization, and commits what they decided through
the session's write path. When the committed text differs from the raw result, the raw text is a
``tool_original`` blob linked from the commit (``links["original"]``), and the usage records of the call are
stored in the same transaction and linked (``links["usages"]``): both travel with the branch.

**Results with parts.** A result may be a list of content parts (text, images, documents: see
:mod:`tractkv.engine.content`). A list is parts only when it holds at least one dict and **every** item
parses as a part (a ``str``, or a dict that is a valid part); otherwise it is a JSON result like any other
value, exactly as before parts existed: ``[{"type": "document", "id": 3, "title": "Q3"}]`` (search hits)
and ``["a.txt", "b.txt"]`` are stored as their JSON text. A list that cannot be JSON either (it holds bytes)
is refused with the error of the part that failed. Hooks and
summarization see and change only the text (the text parts joined); the images and documents are kept: a
result whose text a hook or summary changed is committed as that text followed by the original media parts,
and the raw text is its ``tool_original`` as usual.

The model is reached through ``ask_model(instructions, text) -> text`` given by the facade, so this module
knows nothing of LLM clients.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from tractkv.errors import ContentError, InvalidInput
from tractkv.ids import ObjectId
from tractkv.model import Blob, UsageRecord
from tractkv.store import WriteBatch

from .commit_info import commit_info
from .content import content_objects
from .hooks import HookRegistry, PendingToolResult
from .queries import ToolTurn, context_infos, tool_turns
from .records import CommitInfo
from .session import Session, Tip
from .usage_rows import USAGE_LINK

DEFAULT_SUMMARY_INSTRUCTIONS = (
    "Summarize this tool output for an AI agent. Keep every fact, number, name and error it may need; "
    "drop repetition and boilerplate."
)
ORIGINAL_LINK = "original"  # Commit.links name of the raw result behind an edited or summarized one

AskModel = Callable[[str, str], str]
"""(instructions, text) -> the model's reply text; raises NoLLMConfigured when there is no model."""


@attrs.frozen(kw_only=True)
class SummarySettings:
    """``configure_tool_summarization``'s settings."""

    instructions: dict[str, str] = attrs.field(factory=dict)
    auto_threshold: int | None = None
    default: str | None = None


class ToolResults:
    """The tool-result pipeline of one session (hooks and summarization settings are per handle)."""

    def __init__(self, session: Session, ask_model: AskModel) -> None:
        self.session = session
        self.hooks = HookRegistry()
        self.settings = SummarySettings()
        self._ask_model = ask_model

    def configure(
        self,
        instructions: dict[str, str] | None = None,
        auto_threshold: int | None = None,
        default_instructions: str | None = None,
    ) -> None:
        if auto_threshold is not None and auto_threshold < 1:
            raise InvalidInput("auto_threshold must be a positive token count")
        self.settings = SummarySettings(
            instructions=dict(instructions or {}), auto_threshold=auto_threshold, default=default_instructions
        )

    def summarize(
        self, tool_name: str | None, text: str, instructions: str | None, target: int | None
    ) -> str:
        """A model summary of ``text`` (instructions: given, else the tool's, else the default ones)."""
        settings = self.settings
        guide = instructions or (settings.instructions.get(tool_name) if tool_name else None)
        guide = guide or settings.default or DEFAULT_SUMMARY_INSTRUCTIONS
        if target:
            guide += f" Keep it under about {target} tokens."
        summary = self._ask_model(guide, text)
        if not isinstance(summary, str) or not summary.strip():
            raise ContentError("the model returned an empty summary")
        return summary

    # --- committing ---------------------------------------------------------------------------------------

    def commit_result(
        self,
        tool_call_id: str,
        name: str,
        content: Any,
        *,
        edit: str | None = None,
        is_error: bool = False,
        message: str | None = None,
        metadata: dict[str, Any] | None = None,
        usages: Sequence[UsageRecord] = (),
        hooks: bool = True,
    ) -> CommitInfo | None:
        """Commit the result of a tool call (see :meth:`tractkv.Tract.tool_result`); None when a hook rejected it."""
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise InvalidInput("tool_call_id must be a non-empty string")
        if not isinstance(name, str) or not name:
            raise InvalidInput("name must be a non-empty string")
        parts: list[dict[str, Any]] = []
        media: tuple[Blob, ...] = ()
        parsed, failure = self._as_parts(content, tool_call_id)
        if parsed is not None:
            blob, media = parsed
            text = blob.data["text"]
            parts = blob.data.get("parts", [])
        elif isinstance(content, str):
            text = content
        else:
            try:
                text = json.dumps(content, ensure_ascii=False, sort_keys=True)
            except (TypeError, ValueError) as exc:  # bytes, sets, circular: neither parts nor JSON
                if failure is not None:
                    raise failure from None
                raise ContentError(
                    f"a tool result must be a string, a list of content parts or a JSON value ({exc})"
                ) from None
        tip = self.session.writable("commit a tool result")  # hooks may call a model: commit on this tip
        call_commit, call_name = self.find_call(tool_call_id)
        if call_name != name:
            raise InvalidInput(f"tool call {tool_call_id!r} called {call_name!r}, not {name!r}")
        target = None
        final: str | None = text
        if edit is not None:
            target = self._result_target(edit, tool_call_id)
        else:
            self._check_open(tool_call_id)
        if edit is None and hooks:
            final = self._run_hooks(tool_call_id, name, text)
            if final is None:
                return None
        assert final is not None
        return self._commit(
            tip,
            call_commit,
            tool_call_id,
            name,
            final,
            text,
            target,
            is_error,
            message,
            metadata,
            usages,
            parts=parts,
            media=media,
        )

    def review(self, name: str, text: str, *, label: str = "") -> str | None:
        """What the ``tool_result`` hooks (or, without hooks, the configured summarization) make of a result
        that is not committed as a message: a nested call's, whose text goes back to the tool that made it.
        Nothing is committed. Returns the text to use, or None when a hook rejected it. ``label`` is what
        the hooks see as the pending result's ``tool_call_id`` (a nested call has none: its usage id).

        Raises:
            what the hooks or the summarizer raise (NoLLMConfigured: summarization without a model).
        """
        return self._run_hooks(label, name, text)

    def _as_parts(
        self, content: object, tool_call_id: str
    ) -> tuple[tuple[Blob, tuple[Blob, ...]] | None, ContentError | None]:
        """``content_objects`` of a result given as content parts (see the module docstring), else None and
        why the parts did not parse (None when ``content`` is no list holding a dict)."""
        if not isinstance(content, list | tuple) or not any(isinstance(item, dict) for item in content):
            return None, None
        payload = {"type": "dialogue", "role": "tool", "parts": content, "tool_call_id": tool_call_id}
        try:
            return content_objects(payload, self.session.stored_media), None
        except ContentError as exc:
            return None, exc

    def _result_target(self, rev: str, tool_call_id: str) -> ObjectId:
        session = self.session
        target = session.message_target(rev)
        reader = session.reader()
        old = commit_info(reader, target, reader.get_commit(target), session.counter).content
        if not isinstance(old, dict) or old.get("tool_call_id") != tool_call_id:
            raise InvalidInput(f"{rev} is not a result of tool call {tool_call_id!r}")
        return target

    def _commit(
        self,
        tip: Tip,
        call_commit: ObjectId,
        tool_call_id: str,
        name: str,
        final: str,
        text: str,
        target: ObjectId | None,
        is_error: bool,
        message: str | None,
        metadata: dict[str, Any] | None,
        usages: Sequence[UsageRecord] = (),
        *,
        parts: Sequence[dict[str, Any]] = (),
        media: tuple[Blob, ...] = (),
    ) -> CommitInfo:
        payload: dict[str, Any] = {
            "type": "dialogue",
            "role": "tool",
            "text": final,
            "tool_call_id": tool_call_id,
            "name": name,
        }
        if parts:  # stored-form parts (media by id): the text a hook kept or changed, then the media
            kept = list(parts) if final == text else [p for p in parts if p["type"] != "text"]
            if final != text and final:
                kept.insert(0, {"type": "text", "text": final})
            del payload["text"]
            payload["parts"] = kept
        if is_error:
            payload["is_error"] = True
        blob = content_objects(payload)[0]  # media by id: their blobs are ``media``
        original = Blob(data={"type": "tool_original", "text": text}) if final != text else None
        nested = {child for record in usages for child in record.children}

        def stage(batch: WriteBatch) -> dict[str, tuple[ObjectId, ...]]:
            links: dict[str, tuple[ObjectId, ...]] = {}
            if original is not None:
                links[ORIGINAL_LINK] = (batch.put(original),)
            if usages:  # re-stored here: a gc since they were recorded cannot drop them
                stored = [batch.put(record) for record in usages]
                links[USAGE_LINK] = tuple(oid for oid in stored if oid not in nested)
            return links

        return self.session.commit_content(
            blob,
            operation="edit" if target is not None else "append",
            target=target,
            reply_to=call_commit,
            message=message,
            metadata=metadata,
            stage=stage,
            action="commit a tool result",
            tip=tip,
            media=media,
        )

    def _run_hooks(self, tool_call_id: str, name: str, text: str) -> str | None:
        counter = self.session.counter
        tokens = counter.count(text)
        threshold = self.settings.auto_threshold
        if not self.hooks.has("tool_result"):
            if threshold is not None and tokens > threshold:
                return self.summarize(name, text, None, None)
            return text
        pending = PendingToolResult(
            tool_call_id=tool_call_id,
            tool_name=name,
            content=text,
            token_count=tokens,
            summarizer=self.summarize,
            counter=counter.count,
        )
        self.hooks.run_tool_result(pending)
        return None if pending.decision == "reject" else pending.content

    def _check_open(self, tool_call_id: str) -> None:
        """Refuse a new result for a call HEAD's context no longer waits for: compile would leave it out of
        every request (:mod:`tractkv.engine.pairing`), so committing it would lose it silently.

        Raises:
            InvalidInput: the call is answered already, closed by a later message, or its message is skipped.
        """
        session = self.session
        if tool_call_id in session.head_state(session.reader()).render(session.reader()).pairing.open:
            return
        raise InvalidInput(
            f"tool call {tool_call_id!r} is not waiting for a result in {session.where()} (answered already, "
            "closed by a later message, or its message is skipped): compile would leave a new result out; "
            "to change its result use edit=<the result's commit>"
        )

    def find_call(self, tool_call_id: str) -> tuple[ObjectId, str]:
        """The assistant commit in HEAD's context that made a tool call, and the tool's name."""
        session = self.session
        reader = session.reader()
        state = session.head_state(reader)
        for slot in reversed(state.slots):
            for call in state.message_of(reader, slot).tool_calls:
                if call.id == tool_call_id:
                    return slot.commit, call.name
        raise InvalidInput(f"no assistant message in {session.where()} made tool call {tool_call_id!r}")

    def original_of(self, rev: str) -> str:
        """The raw tool result behind a (possibly edited or summarized) result commit."""
        session = self.session
        reader = session.reader()
        oid = session.resolve(rev)
        commit = reader.get_commit(oid)
        for original_id in commit.links.get(ORIGINAL_LINK, ()):
            blob = reader[original_id]
            if isinstance(blob, Blob) and isinstance(blob.data, dict):
                return str(blob.data.get("text", ""))
        info = commit_info(reader, oid, commit, session.counter)
        if not isinstance(info.content, dict) or info.role != "tool":
            raise InvalidInput(f"{oid[:12]} is not a tool result")
        return str(info.content.get("text", ""))

    # --- queries ------------------------------------------------------------------------------------------

    def find_results(self, name: str | None = None, after: str | None = None) -> list[CommitInfo]:
        """Tool results in HEAD's context (of one tool, or after a commit), in order."""
        infos = context_infos(self.session)
        if after is not None:
            after_id = self.session.resolve(after)
            ids = [i.commit_id for i in infos]
            infos = infos[ids.index(after_id) + 1 :] if after_id in ids else []
        return [
            i for i in infos if i.role == "tool" and (name is None or (i.content or {}).get("name") == name)
        ]

    def find_turns(self, name: str | None = None) -> list[ToolTurn]:
        """Each assistant tool-calling message in HEAD's context with the results answering its calls."""
        return tool_turns(context_infos(self.session), name)

    def compress_calls(self, name: str | None = None, commits: list[str] | None = None) -> list[CommitInfo]:
        """Summarize tool results in place, as edits (see :meth:`tractkv.Tract.compress_tool_calls`)."""
        self.session.writable("compress tool results")  # refuse before any model call
        if commits is not None:
            wanted = {self.session.message_target(c) for c in commits}
            results = [r for r in self.find_results() if r.commit_id in wanted]
        else:
            results = self.find_results(name)
        out = []
        for result in results:
            data = result.content if isinstance(result.content, dict) else {}
            tool = str(data.get("name", ""))
            tip = self.session.writable("compress tool results")  # each edit commits on the tip it summarized
            original = self.original_of(result.commit_id)
            summary = self.summarize(tool, str(data.get("text", "")), None, None)
            call_id = str(data.get("tool_call_id"))
            call_commit, _ = self.find_call(call_id)
            out.append(
                self._commit(
                    tip,
                    call_commit,
                    call_id,
                    tool,
                    summary,
                    original,
                    result.commit_id,
                    bool(data.get("is_error")),
                    f"compress {tool}",
                    None,
                    parts=data.get("parts") or (),  # its images and documents stay (stored already)
                )
            )
        return out
