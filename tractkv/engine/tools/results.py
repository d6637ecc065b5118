"""The tool-result pipeline: hooks, summarization, the result commit, and queries over tool turns.

A tool result is a dialogue message with role ``tool`` answering (``reply_to``) the assistant commit that
made the call. :meth:`ToolResults.commit_result` finds that call in HEAD's context, runs the ``tool_result``
hooks (:mod:`tractkv.engine.tools.hooks`) or the automatic summarization, and commits what they decided through
the session's write path. When the committed text differs from the raw result, the raw text is a
``tool_original`` blob linked from the commit (``links["original"]``), and the usage records of the call are
stored in the same transaction and linked (``links["usages"]``): both travel with the branch.

**Results with parts.** A result may be a list of content parts (text, images, documents: see
:mod:`tractkv.engine.content.payload`). A list is parts only when it holds at least one dict and **every** item
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

from tractkv.engine.compile import commit_info
from tractkv.engine.content import content_objects, kept_by_edit
from tractkv.engine.session import Session, Tip
from tractkv.engine.tools.hooks import APPROVED, REJECTED, HookRegistry, PendingToolResult
from tractkv.engine.tools.queries import ToolTurn, call_names, context_infos, tool_infos, tool_turns
from tractkv.engine.usage import USAGE_LINK, retire_rows
from tractkv.engine.values import CommitInfo
from tractkv.errors import ContentError, InvalidInput
from tractkv.ids import ObjectId
from tractkv.model import Blob, UsageRecord, object_id
from tractkv.store import WriteBatch

DEFAULT_SUMMARY_INSTRUCTIONS = (
    "Summarize this tool output for an AI agent. Keep every fact, number, name and error it may need; "
    "drop repetition and boilerplate."
)
ORIGINAL_LINK = "original"  # Commit.links name of the raw result behind an edited or summarized one
TRIGGERED_BY = "triggered_by"  # metadata: the hook (or feature) that handled a result
SUMMARIZED_FROM = "summarized_from"  # metadata: id of the tool_original blob a summary was made from

AskModel = Callable[[str, str], str]
"""(instructions, text) -> the model's reply text; raises NoLLMConfigured when there is no model."""

CommitResult = Callable[..., CommitInfo]
"""(final text, provenance metadata, later=False) -> the result commit."""


def _original_blob(text: str) -> Blob:
    return Blob(data={"type": "tool_original", "text": text})


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
        self._running: PendingToolResult | None = None  # the result the hooks are deciding on

    def configure(
        self,
        instructions: dict[str, str] | None = None,
        auto_threshold: int | None = None,
        default_instructions: str | None = None,
    ) -> None:
        """Replace the summarization settings (all defaults: summarize nothing automatically).

        Without a ``tool_result`` hook, a new result of a tool listed in ``instructions`` is always summarized
        with its instructions; a result of any other tool is summarized with ``default_instructions`` (else
        the built-in ones) when it has more than ``auto_threshold`` tokens; every other result is committed
        as it is. With a hook registered the hook decides, and these instructions only guide
        ``pending.summarize()`` and ``compress_tool_calls``.

        Raises:
            InvalidInput: instructions not a dict of tool name -> non-empty text, a threshold that is not a
                positive int, default_instructions not a non-empty string. The settings are unchanged.
        """
        if instructions is not None and (
            not isinstance(instructions, dict)
            or not all(
                isinstance(k, str) and k and isinstance(v, str) and v.strip() for k, v in instructions.items()
            )
        ):
            raise InvalidInput("instructions must map tool names to non-empty instruction texts")
        if auto_threshold is not None and (
            isinstance(auto_threshold, bool) or not isinstance(auto_threshold, int) or auto_threshold < 1
        ):
            raise InvalidInput("auto_threshold must be a positive token count (an int), or None")
        if default_instructions is not None and (
            not isinstance(default_instructions, str) or not default_instructions.strip()
        ):
            raise InvalidInput("default_instructions must be a non-empty string, or None")
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
        name: str | None,
        content: Any,
        *,
        edit: str | None = None,
        is_error: bool = False,
        message: str | None = None,
        metadata: dict[str, Any] | None = None,
        usages: Sequence[UsageRecord] = (),
        hooks: bool = True,
    ) -> CommitInfo | PendingToolResult | None:
        """Commit the result of a tool call (see :meth:`tractkv.Tract.tool_result`): the commit, None when a
        hook rejected it, or the :class:`PendingToolResult` no hook decided on."""
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise InvalidInput("tool_call_id must be a non-empty string")
        if name is not None and (not isinstance(name, str) or not name):
            raise InvalidInput("name must be a non-empty string (or None: the name the call gives)")
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
        if name is None:
            name = call_name
        elif call_name != name:
            raise InvalidInput(f"tool call {tool_call_id!r} called {call_name!r}, not {name!r}")
        target = None
        if edit is not None:
            target = self._result_target(edit, tool_call_id)
            if parsed is None:  # text or JSON: the result's images and documents stay (one rule for edits)
                parts = self._kept_parts(target, text) or parts
        else:
            self._check_open(tool_call_id)
        if edit is not None or not hooks or self._running:  # edit=: the caller decided already
            return self._commit(
                tip,
                call_commit,
                tool_call_id,
                name,
                text,
                text,
                target,
                is_error,
                message,
                metadata,
                usages,
                parts=parts,
                media=media,
            )

        def commit(final: str, provenance: dict[str, Any], *, later: bool = False) -> CommitInfo:
            at, answering = tip, call_commit
            if later:  # a pending result approved after tool_result returned: on the tip as it is now
                at = self.session.writable("commit a tool result")
                if at.ref != tip.ref:
                    raise InvalidInput(
                        f"this pending result of call {tool_call_id!r} belongs to {tip.ref}, not {at.ref}: "
                        "switch back to approve it"
                    )
                answering, now_name = self.find_call(tool_call_id)
                if answering != call_commit or now_name != name:
                    raise InvalidInput(
                        f"call {tool_call_id!r} on {at.ref} is no longer the {name} call this pending result "
                        "answers"
                    )
                self._check_open(tool_call_id)
            return self._commit(
                at,
                answering,
                tool_call_id,
                name,
                final,
                text,
                None,
                is_error,
                message,
                {**(metadata or {}), **provenance},
                usages,
                parts=parts,
                media=media,
            )

        return self._decide(tool_call_id, name, text, is_error, commit)

    def review(self, name: str, text: str, *, label: str = "") -> str | None:
        """What the ``tool_result`` hooks (or, without hooks, the configured summarization) make of a result
        that is not committed as a message: a nested call's, whose text goes back to the tool that made it.
        Nothing is committed. Returns the text to use, or None when a hook rejected it. ``label`` is what
        the hooks see as the pending result's ``tool_call_id`` (a nested call has none: its usage id).

        Raises:
            what the hooks or the summarizer raise (NoLLMConfigured: summarization without a model).
        """
        kept: list[str] = []

        def keep(final: str, _provenance: dict[str, Any], **_: Any) -> Any:
            kept.append(final)  # the decision's text; nothing is committed
            return None

        decision = self._decide(label, name, text, False, keep)
        if isinstance(decision, PendingToolResult):  # undecided: the calling tool needs an answer now
            return decision.content
        return kept[-1] if kept else None  # nothing kept: a hook rejected it

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

    def _kept_parts(self, target: ObjectId, text: str) -> list[dict[str, Any]]:
        """The parts of an edit of result ``target`` given ``text`` and no parts: the target's as it shows now,
        its text replaced (:func:`~tractkv.engine.content.kept_by_edit`, as for any edit); [] when it has
        none."""
        new = {"type": "dialogue", "role": "tool", "text": text}
        kept = kept_by_edit(None, new, self.session.message_content(target))
        return list(kept["parts"]) if kept is not None else []

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
        original = _original_blob(text) if final != text else None
        # The tools in force are those the model that made the call was given (the call's tool set, else the
        # context's), never the branch's set_tools: a result is part of the turn its call began.
        reader = self.session.reader()
        toolset = reader.get_commit(call_commit).tools or self.session.head_state(reader).tools
        nested = {child for record in usages for child in record.children}

        def stage(batch: WriteBatch) -> dict[str, tuple[ObjectId, ...]]:
            links: dict[str, tuple[ObjectId, ...]] = {}
            if original is not None:
                links[ORIGINAL_LINK] = (batch.put(original),)
            if usages:  # re-stored here: a gc since they were recorded cannot drop them
                stored = [batch.put(record) for record in usages]
                links[USAGE_LINK] = tuple(oid for oid in stored if oid not in nested)
            return links

        info = self.session.commit_content(
            blob,
            operation="edit" if target is not None else "append",
            target=target,
            reply_to=call_commit,
            message=message,
            metadata=metadata,
            stage=stage,
            toolset=toolset,
            action="commit a tool result",
            tip=tip,
            media=media,
        )
        if usages:  # linked: their rows (awaiting-link markers, interrupted rows) are done with
            retire_rows(self.session.store, self.session.reader(), [record.usage_id for record in usages])
        return info

    def _decide(
        self, tool_call_id: str, name: str, text: str, is_error: bool, commit: CommitResult
    ) -> CommitInfo | PendingToolResult | None:
        """The hooks' decision on a new result (committed, None when rejected, or the undecided pending
        result), or, without hooks, the configured summarization's (see :meth:`configure`)."""
        counter = self.session.counter
        tokens = counter.count(text)
        if not self.hooks.has("tool_result"):
            settings = self.settings
            own = settings.instructions.get(name)
            if own is None and (settings.auto_threshold is None or tokens <= settings.auto_threshold):
                return commit(text, {})
            summary = self.summarize(name, text, own or settings.default, None)
            return commit(summary, self._provenance("configure_tool_summarization", text, summary, True))

        def approve(pending: PendingToolResult) -> CommitInfo:
            provenance = self._provenance(pending.triggered_by, text, pending.content, pending.summarized)
            return commit(pending.content, provenance, later=self._running is not pending)

        pending = PendingToolResult(
            tool_call_id=tool_call_id,
            tool_name=name,
            content=text,
            token_count=tokens,
            summarizer=self.summarize,
            counter=counter.count,
            commit=approve,
            is_error=is_error,
        )
        self._running = pending
        try:
            self.hooks.run_tool_result(pending)
        finally:
            self._running = None
        if pending.status == APPROVED:
            return pending.result
        return None if pending.status == REJECTED else pending

    @staticmethod
    def _provenance(triggered_by: str | None, raw: str, final: str, summarized: bool) -> dict[str, Any]:
        """``triggered_by`` (what handled the result) and, for a summary, ``summarized_from``: the id of the
        ``tool_original`` blob :meth:`_commit` stores and links for the raw text."""
        out: dict[str, Any] = {}
        if triggered_by:
            out[TRIGGERED_BY] = triggered_by
        if summarized and final != raw:
            out[SUMMARIZED_FROM] = object_id(_original_blob(raw))
        return out

    def _check_open(self, tool_call_id: str) -> None:
        """Refuse a new result for a call HEAD's context no longer waits for: compile would leave it out of
        every request (:mod:`tractkv.engine.compile.pairing`), so committing it would lose it silently.

        Raises:
            InvalidInput: the call is answered already, closed by a later message, or its message is skipped.
        """
        session = self.session
        if tool_call_id in session.head_state(session.reader()).render(session.reader()).pairing.open:
            return
        raise InvalidInput(
            f"tool call {tool_call_id!r} is not waiting for a result in {session.where()} (answered already, "
            "closed by a later message, or its message is skipped): compile would leave a new result out; "
            "to change its result, edit the result's commit (tool_result(edit=...); `tractkv commit --edit`)"
        )

    def find_call(self, tool_call_id: str) -> tuple[ObjectId, str]:
        """The assistant commit in HEAD's context that made a tool call, and the tool's name."""
        session = self.session
        reader = session.reader()
        state = session.head_state(reader)
        for slot in state.slots_reversed():  # a loaded checkpoint's slots stay packed
            for call in state.message_of(reader, slot).tool_calls:
                if call.id == tool_call_id:
                    return slot.commit, call.name
        raise InvalidInput(f"no assistant message in {session.where()} made tool call {tool_call_id!r}")

    def original_of(self, rev: str) -> str:
        """The raw tool result behind a result commit: the text the tool returned, whether the commit is
        the result itself, a hook's or summary's version of it (its ``tool_original``), or an edit of it
        (``tool_result(edit=)``, ``compress_tool_calls``: followed back to the result it edits).

        Raises:
            InvalidInput: ``rev`` is no tool result nor an edit of one. UnknownRevision: no such commit.
        """
        session = self.session
        reader = session.reader()
        oid = session.resolve(rev)
        seen: set[ObjectId] = set()
        while True:
            seen.add(oid)
            commit = reader.get_commit(oid)
            for original_id in commit.links.get(ORIGINAL_LINK, ()):
                blob = reader.get(original_id)
                if (
                    isinstance(blob, Blob)
                    and isinstance(blob.data, dict)
                    and blob.data.get("type") == "tool_original"
                ):
                    return str(blob.data.get("text", ""))
            if (
                commit.operation == "edit"
                and commit.edit_target is not None
                and commit.edit_target not in seen
            ):
                oid = (
                    commit.edit_target
                )  # an edit without an original of its own: the raw result is its target's
                continue
            info = commit_info(reader, oid, commit, session.counter)
            if not isinstance(info.content, dict) or info.role != "tool":
                raise InvalidInput(f"{oid[:12]} is not a tool result")
            return _text_of(info.content)

    # --- queries ------------------------------------------------------------------------------------------

    def find_results(
        self, name: str | None = None, after: str | None = None, scope: str = "context"
    ) -> list[CommitInfo]:
        """Tool results of HEAD's context or history (of one tool, committed after ``after``), in order, each
        at its latest version under its first commit's id (:mod:`tractkv.engine.tools.queries`).

        Raises:
            InvalidInput: a bad ``scope``; ``after`` not in the history of HEAD. UnknownRevision: ``after``.
        """
        return [
            i
            for i in tool_infos(self.session, scope, after)
            if i.role == "tool" and (name is None or (i.content or {}).get("name") == name)
        ]

    def find_calls(
        self, name: str | None = None, after: str | None = None, scope: str = "context"
    ) -> list[CommitInfo]:
        """Assistant messages calling tools (``name`` among them) in HEAD's context or history, in order."""
        return [
            i
            for i in tool_infos(self.session, scope, after)
            if i.role == "assistant" and (name is None or name in call_names(i))
        ]

    def find_turns(
        self, name: str | None = None, after: str | None = None, scope: str = "context"
    ) -> list[ToolTurn]:
        """Each assistant tool-calling message of HEAD's context or history (one calling ``name``, made after
        ``after``) with the results answering its calls, in order."""
        return tool_turns(tool_infos(self.session, scope, after), name)

    def compress_calls(
        self,
        name: str | None = None,
        commits: list[str] | None = None,
        instructions: str | None = None,
        target_tokens: int | None = None,
    ) -> list[CommitInfo]:
        """Summarize tool results of HEAD's context in place, as edits (see
        :meth:`tractkv.Tract.compress_tool_calls`); one model call and one commit per result, in order."""
        self.session.writable("compress tool results")  # refuse before any model call
        if instructions is not None and (not isinstance(instructions, str) or not instructions.strip()):
            raise InvalidInput("instructions must be a non-empty string, or None")
        results = [i for i in context_infos(self.session) if i.role == "tool"]  # in context: history is H's
        if commits is not None:
            wanted = {self.session.message_target(c) for c in commits}
            results = [r for r in results if r.commit_id in wanted]
        elif name is not None:
            results = [r for r in results if (r.content or {}).get("name") == name]
        out = []
        for result in results:
            data = result.content if isinstance(result.content, dict) else {}
            tool = str(data.get("name", ""))
            tip = self.session.writable("compress tool results")  # each edit commits on the tip it summarized
            original = self.original_of(result.commit_id)
            summary = self.summarize(tool, _text_of(data), instructions, target_tokens)
            call_id = str(data.get("tool_call_id"))
            call_commit, _ = self.find_call(call_id)
            provenance = self._provenance("compress_tool_calls", original, summary, True)
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
                    provenance,
                    parts=data.get("parts") or (),  # its images and documents stay (stored already)
                )
            )
        return out


def _text_of(data: dict[str, Any]) -> str:
    """A result payload's text (a result with parts stores its text parts joined there too)."""
    return str(data.get("text", ""))
