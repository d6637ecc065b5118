"""Content parts: every accepted input shape -> the stored payload, refusals naming the part, media blobs
stored once and linked, compile with bytes loaded, token estimates, rendering with the exact bytes."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

from tractkv import CommitInfo, Tract
from tractkv.engine.content import Message, Part, content_objects, media_ids
from tractkv.engine.content.tokens import IMAGE_TOKENS, PDF_PAGE_TOKENS, image_tokens
from tractkv.engine.history import check_commit
from tractkv.engine.history.validate import tag
from tractkv.errors import ContentError, InvalidInput
from tractkv.ids import ObjectId
from tractkv.model import MAX_OBJECT_BYTES, Blob, Commit, encode, object_id
from tractkv.store import MemoryStore

from .media_files import gif, jpeg, pdf, png, webp

PNG = png(4, 3)
PNG_ID = object_id(Blob(data=PNG))
PDF = pdf(2)
B64 = base64.b64encode(PNG).decode()


def stored(parts: list[Any], role: str = "user") -> tuple[dict[str, Any], tuple[Blob, ...]]:
    blob, media = content_objects({"type": "dialogue", "role": role, "parts": parts})
    return blob.data, media


IMAGE = {"type": "image", "media_type": "image/png", "media": PNG_ID}


@pytest.mark.parametrize(
    ("given", "part"),
    [
        ({"type": "image", "data": PNG, "media_type": "image/png"}, IMAGE),
        (
            {"type": "image", "data": bytearray(PNG), "media_type": "image/png", "detail": "low"},
            {**IMAGE, "detail": "low"},
        ),
        ({"type": "image", "url": "https://x.test/a.png"}, {"type": "image", "url": "https://x.test/a.png"}),
        ({"type": "image", "url": f"data:image/png;base64,{B64}"}, IMAGE),
        ({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}}, IMAGE),
        (
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "high"}},
            {"type": "image", "url": "https://x.test/a.png", "detail": "high"},
        ),
        ({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}, IMAGE),
        (
            {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
            {"type": "image", "url": "https://x.test/a.png"},
        ),
        (IMAGE, IMAGE),  # the stored form itself (media already stored)
        (
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": B64},
                "cache_control": None,
            },
            IMAGE,  # None-valued keys (model_dump output) count as absent
        ),
    ],
)
def test_image_input_shapes_store_one_form(given: dict[str, Any], part: dict[str, Any]) -> None:
    data, media = stored(["look:", given])
    assert data == {
        "type": "dialogue",
        "role": "user",
        "text": "look:",
        "parts": [{"type": "text", "text": "look:"}, part],
    }
    if "media" in part and "media" not in given:
        assert media == (Blob(data=PNG),)
    else:
        assert media == ()


def test_document_input_shapes() -> None:
    pdf_part = {"type": "document", "media_type": "application/pdf", "media": object_id(Blob(data=PDF))}
    b64 = base64.b64encode(PDF).decode()
    shapes = [
        {"type": "document", "data": PDF, "media_type": "application/pdf", "title": "Report"},
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{b64}", "filename": "Report"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": b64},
            "title": "Report",
        },
    ]
    for shape in shapes:
        data, media = stored([shape])
        assert data["parts"] == [{**pdf_part, "title": "Report"}]
        assert data["text"] == ""
        assert media == (Blob(data=PDF),)
    data, media = stored(
        [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "é notes"}}]
    )
    assert data["parts"][0]["media_type"] == "text/plain"
    assert media == (Blob(data="é notes".encode()),)
    data, _ = stored([{"type": "document", "source": {"type": "url", "url": "https://x.test/r.pdf"}}])
    assert data["parts"] == [{"type": "document", "url": "https://x.test/r.pdf"}]


def test_text_only_parts() -> None:
    assert stored(["just text"])[0] == {"type": "dialogue", "role": "user", "text": "just text"}
    assert stored([{"type": "text", "text": "one"}])[0] == {"type": "dialogue", "role": "user", "text": "one"}
    data, _ = stored(["a", {"type": "text", "text": "b"}])
    assert data["text"] == "ab"
    assert data["parts"] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]


def test_assistant_parts() -> None:
    parts = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "answer"},
        {"type": "refusal", "refusal": "no"},
    ]
    data, media = stored(parts, role="assistant")
    assert data == {"type": "dialogue", "role": "assistant", "text": "answer", "parts": parts}
    assert media == ()
    # a refusal alone is a message (its text is empty)
    assert stored([{"type": "refusal", "refusal": "no"}], role="assistant")[0]["text"] == ""


@pytest.mark.parametrize(
    ("parts", "role", "words"),
    [
        (
            ["x", {"type": "image", "data": PNG, "media_type": "image/jpeg"}],
            "user",
            "parts[1]: the data is not a image/jpeg",
        ),
        ([{"type": "image", "data": PNG}], "user", "parts[0]: media_type must be one of"),
        ([{"type": "image", "data": PNG, "media_type": "image/svg+xml"}], "user", "parts[0]: media_type"),
        ([{"type": "image", "data": b"", "media_type": "image/png"}], "user", "parts[0]: empty data"),
        (
            [{"type": "image", "data": "aGk=", "media_type": "image/png"}],
            "user",
            "parts[0].data must be bytes",
        ),
        (
            [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "!!"}}],
            "user",
            "parts[0].source: invalid base64",
        ),
        ([{"type": "image", "url": "http://x.test/a.png"}], "user", "parts[0].url must be an https:// URL"),
        ([{"type": "image_url", "image_url": {"url": "ftp://x"}}], "user", "parts[0].url"),
        (
            [{"type": "image_url", "image_url": {"url": "data:image/png,raw"}}],
            "user",
            "parts[0]: a data: URL",
        ),
        ([{"type": "image", "url": "https://x.test/a", "detail": "ultra"}], "user", "parts[0]: detail"),
        (
            [{"type": "image", "data": PNG, "media_type": "image/png", "alt": "x"}],
            "user",
            "unknown keys ['alt']",
        ),
        ([{"type": "document", "data": b"\xff\xfe", "media_type": "text/plain"}], "user", "not UTF-8"),
        ([{"type": "file", "file": {"file_id": "file-1"}}], "user", "file_id"),
        (
            [{"type": "thinking", "thinking": "t", "signature": "s"}],
            "user",
            "parts[0]: a thinking part belongs",
        ),
        (
            ["x", {"type": "image", "data": PNG, "media_type": "image/png"}],
            "assistant",
            "parts[1]: an image belongs",
        ),
        ([{"type": "thinking", "thinking": "t"}], "assistant", "string signature"),
        (["", "x"], "user", "parts[0]: an empty text part"),
        ([{"type": "audio"}], "user", "parts[0]: unknown part type 'audio'"),
        ([3], "user", "parts[0] must be a str or a dict"),
        (
            [{"type": "image", "media": "ab", "media_type": "image/png"}],
            "user",
            "parts[0].media must be an object id",
        ),
        (["a", {"type": ["image"]}], "user", "parts[1]: the part type must be a string, not list"),
        ([{"type": {"a": 1}}], "user", "parts[0]: the part type must be a string, not dict"),
        ([{"type": {"a": 1}}], "assistant", "parts[0]: the part type must be a string, not dict"),
        (
            [{"type": "document", "data": PDF, "media_type": "application/pdf", "title": ""}],
            "user",
            "parts[0]: an empty title",
        ),
        (
            [
                {
                    "type": "file",
                    "file": {
                        "file_data": f"data:application/pdf;base64,{base64.b64encode(PDF).decode()}",
                        "filename": "",
                    },
                }
            ],
            "user",
            "parts[0]: an empty title",
        ),
        (
            [{"type": "image", "data": png(8001, 1), "media_type": "image/png"}],
            "user",
            "parts[0]: the image is 8001 x 1 pixels, over the 8000 px",
        ),
        (
            [{"type": "image", "data": jpeg(100, 9000), "media_type": "image/jpeg"}],
            "user",
            "parts[0]: the image is 100 x 9000 pixels",
        ),
    ],
)
def test_refusals_name_the_part(parts: list[Any], role: str, words: str) -> None:
    with pytest.raises(ContentError, match=_escape(words)):
        stored(parts, role=role)


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_size_limits_are_the_providers() -> None:
    """Images: at most 5 MB as base64 (Anthropic's per-image limit) and 8000 px a side; documents 32 MB."""
    from tractkv.engine.content import media

    assert media.MAX_IMAGE_BYTES == 5 * 1024 * 1024
    assert media.MAX_IMAGE_SIDE == 8000
    assert media.MAX_DOCUMENT_BYTES == 32 * 1024 * 1024
    largest = media.MAX_IMAGE_BYTES // 4 * 3  # its base64 is exactly 5 MB
    stored([{"type": "image", "data": png(8000, 1, size=largest), "media_type": "image/png"}])
    with pytest.raises(ContentError, match=r"parts\[0\]: the image is .* as base64\), over the 5.0 MB"):
        stored([{"type": "image", "data": png(2, 2, size=largest + 1), "media_type": "image/png"}])
    # A document is one stored object: the object size limit (16 MiB encoded) is the tighter of the two.
    assert media.MAX_MEDIA_BYTES < media.MAX_DOCUMENT_BYTES
    text = b"a" * media.MAX_MEDIA_BYTES
    _, (blob,) = stored([{"type": "document", "data": text, "media_type": "text/plain"}])
    assert len(encode(blob)) == MAX_OBJECT_BYTES  # exactly at the limit: written, carried, read
    with pytest.raises(
        ContentError,
        match=r"parts\[1\]: the document is 16,777,196 bytes, over the 16,777,195 one stored object holds",
    ):
        stored(["x", {"type": "document", "data": text + b"a", "media_type": "text/plain"}])
    with pytest.raises(ContentError, match=r"parts\[0\]: the document is 32.0 MB, over the 32.0 MB"):
        stored(
            [{"type": "document", "data": b"a" * (media.MAX_DOCUMENT_BYTES + 1), "media_type": "text/plain"}]
        )


def test_a_part_naming_a_stored_blob_is_checked_like_new_bytes(tract: Tract) -> None:
    """The stored form (``media`` by id) has its blob's bytes checked against the declared media type."""
    tract.user(["first", {"type": "image", "data": PNG, "media_type": "image/png"}])
    again = tract.user(["again", IMAGE])  # the right type: accepted, nothing new stored
    assert again.content["parts"][1] == IMAGE
    for part, words in [
        ({**IMAGE, "media_type": "image/jpeg"}, "not a image/jpeg file"),
        ({"type": "document", "media_type": "application/pdf", "media": PNG_ID}, "not a application/pdf"),
        (
            {"type": "image", "media_type": "image/png", "media": "a" * 64},
            "is not a stored image or document",
        ),
    ]:
        with pytest.raises(ContentError, match=_escape("parts[1]")) as info:
            tract.user(["x", part])
        assert words in str(info.value)
    bad_text = Blob(data=b"\xff\xfe not utf-8")
    batch = tract.store.new_batch()
    batch.put(bad_text)
    tract.store.apply(batch)
    with pytest.raises(ContentError, match=r"parts\[0\]: media .*: text/plain data is not UTF-8"):
        tract.user([{"type": "document", "media_type": "text/plain", "media": object_id(bad_text)}])
    tract.assistant(tool_calls=[{"id": "c1", "name": "shot", "arguments": {}}])
    with pytest.raises(ContentError, match="not a image/gif file"):
        tract.tool_result(
            "c1", "shot", ["x", {**IMAGE, "media_type": "image/gif"}, {"type": "image", "data": b"!"}]
        )
    assert [m.content for m in tract.compile().messages][-2:] == ["again", ""]


def test_text_must_be_the_parts_joined() -> None:
    with pytest.raises(ContentError, match="text must be the text parts joined"):
        content_objects({"type": "dialogue", "role": "user", "text": "other", "parts": ["a", IMAGE]})
    data = content_objects({"type": "dialogue", "role": "user", "text": "a", "parts": ["a", IMAGE]})[0].data
    assert data["text"] == "a"
    with pytest.raises(ContentError, match="parts must be a list"):
        content_objects({"type": "dialogue", "role": "user", "parts": "a"})


def test_commit_stores_media_once_and_links_it(tract: Tract) -> None:
    first = tract.user(["one", {"type": "image", "data": PNG, "media_type": "image/png"}])
    second = tract.user([{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}}, "two"])
    for info in (first, second):
        commit = tract.store.get_commit(info.commit_id)
        assert commit is not None
        assert commit.links["media"] == (PNG_ID,)
    assert tract.store.get(ObjectId(PNG_ID)) == Blob(data=PNG)
    assert media_ids(second.content) == (PNG_ID,)
    plain = tract.store.get_commit(tract.user("no media").commit_id)
    assert plain is not None
    assert "media" not in plain.links


def test_compile_loads_the_bytes_and_to_dict_round_trips(open_tract: Any) -> None:
    t = open_tract()
    t.user(
        [
            "see",
            {"type": "image", "data": PNG, "media_type": "image/png", "detail": "high"},
            {"type": "document", "data": PDF, "media_type": "application/pdf", "title": "R"},
        ]
    )
    message = t.compile().messages[-1]
    assert message.content == "see"
    assert message.parts == (
        Part(type="text", text="see"),
        Part(type="image", media_type="image/png", data=PNG, media=PNG_ID, detail="high"),
        Part(
            type="document",
            media_type="application/pdf",
            data=PDF,
            media=object_id(Blob(data=PDF)),
            title="R",
        ),
    )
    as_dict = message.to_dict()
    assert as_dict["parts"][1] == {"type": "image", "media_type": "image/png", "data": PNG, "detail": "high"}
    again = t.user(as_dict["parts"])  # to_dict's parts are input again: same content
    assert again.content_id == t.log(limit=2)[1].content_id
    t.close()
    fresh = open_tract()  # another handle (LMDB: reopened) compiles from the objects
    assert fresh.compile().messages[-1] == message


def test_token_estimates() -> None:
    assert image_tokens(png(100, 50)) == 7  # 5000 / 750, rounded up
    assert image_tokens(gif(30, 30)) == 2
    assert image_tokens(webp(750, 1)) == 1
    assert image_tokens(jpeg(3000, 2000)) == IMAGE_TOKENS  # scaled to 1568 x 1045: over the cap
    assert image_tokens(jpeg(1000, 600)) == 800
    assert image_tokens(None) == IMAGE_TOKENS
    assert image_tokens(b"\x89PNG\r\n\x1a\nshort") == IMAGE_TOKENS


def test_token_totals_include_parts(tract: Tract) -> None:
    base = tract.user("x").token_count
    with_image = tract.user(["x", {"type": "image", "data": png(100, 50), "media_type": "image/png"}])
    assert with_image.token_count == base + 7
    with_pdf = tract.user(["x", {"type": "document", "data": pdf(3), "media_type": "application/pdf"}])
    assert with_pdf.token_count == base + 3 * PDF_PAGE_TOKENS
    by_url = tract.user(["x", {"type": "image", "url": "https://x.test/a.png"}])
    assert by_url.token_count == base + IMAGE_TOKENS
    thinking = tract.assistant([{"type": "thinking", "thinking": "word " * 40, "signature": "s"}, "x"])
    assert thinking.token_count > base + 30
    assert tract.compile().token_count == sum(i.token_count for i in tract.log() if i.role)
    assert tract.get_commit(with_image.commit_id).token_count == with_image.token_count


def test_edit_links_the_new_media(tract: Tract) -> None:
    old = tract.user(["a", {"type": "image", "data": PNG, "media_type": "image/png"}])
    other = png(8, 8, seed=3)
    edit = tract.commit(
        {
            "type": "dialogue",
            "role": "user",
            "parts": ["b", {"type": "image", "data": other, "media_type": "image/png"}],
        },
        operation="edit",
        edit_target=old.commit_id,
    )
    commit = tract.store.get_commit(edit.commit_id)
    assert commit is not None
    assert commit.links["media"] == (object_id(Blob(data=other)),)
    assert tract.compile().messages[-1].parts[1].data == other


def test_tool_result_parts_keep_media_through_summaries(tract: Tract) -> None:
    tract.assistant(tool_calls=[{"id": "c1", "name": "shot", "arguments": {}}])
    tract.on("tool_result", lambda pending: (pending.edit_result("short"), pending.approve()))
    info = tract.tool_result(
        "c1", "shot", ["a long text", {"type": "image", "data": PNG, "media_type": "image/png"}]
    )
    assert info is not None
    assert info.content["parts"] == [{"type": "text", "text": "short"}, IMAGE]
    assert tract.original_of(info.commit_id) == "a long text"
    message = tract.compile().messages[-1]
    assert message.role == "tool"
    assert message.content == "short"
    assert message.parts[1].data == PNG
    # a list without part dicts is still JSON
    tract.assistant(tool_calls=[{"id": "c2", "name": "shot", "arguments": {}}])
    plain = tract.tool_result("c2", "shot", ["a", "b"], hooks=False)
    assert plain is not None
    assert plain.content["text"] == '["a", "b"]'


@pytest.mark.parametrize(
    "result",
    [
        [{"type": "document", "id": 3, "title": "Q3 report"}],  # search hits: not document parts
        [{"type": "text", "text": "a", "score": 1}],
        [{"type": "image", "url": "http://example.test/a.png", "rank": 2}],
        [{"type": "file", "path": "/tmp/a"}, "b"],
        [{"type": ["x"]}],
        ["a", {"type": "text", "text": "b"}, {"id": 3}],  # one item that is no part: all JSON
        [],
    ],
)
def test_a_list_that_is_not_all_parts_is_a_json_result(tract: Tract, result: list[Any]) -> None:
    """A list is parts only when every item parses as a part; else its JSON text, as before parts existed."""
    import json

    tract.assistant(tool_calls=[{"id": "c1", "name": "search", "arguments": {}}])
    info = tract.tool_result("c1", "search", result)
    assert info is not None
    assert info.content["text"] == json.dumps(result, ensure_ascii=False, sort_keys=True)
    assert "parts" not in info.content
    assert tract.compile().messages[-1].content == info.content["text"]


def test_a_list_of_valid_parts_is_parts_and_one_that_cannot_be_json_names_its_bad_part(tract: Tract) -> None:
    tract.assistant(
        tool_calls=[{"id": "c1", "name": "f", "arguments": {}}, {"id": "c2", "name": "f", "arguments": {}}]
    )
    info = tract.tool_result("c1", "f", [{"type": "text", "text": "a"}, "b"])
    assert info is not None
    assert info.content["text"] == "ab"  # every item a part: parts (here one text)
    with pytest.raises(ContentError, match=r"parts\[1\]: the data is not a image/png file"):
        tract.tool_result(
            "c2", "f", ["see", {"type": "image", "data": b"GIF89a....", "media_type": "image/png"}]
        )
    with pytest.raises(
        ContentError, match="a tool result must be a string, a list of content parts or a JSON"
    ):
        tract.tool_result("c2", "f", {"k": {1, 2}})


def test_validator_media_rules() -> None:
    store = MemoryStore()
    blob, media = content_objects(
        {
            "type": "dialogue",
            "role": "user",
            "parts": ["x", {"type": "image", "data": PNG, "media_type": "image/png"}],
        }
    )
    batch = store.new_batch()
    content = batch.put(blob)
    for item in media:
        batch.put(item)
    good = Commit(content=content, created_at=1, links={"media": (PNG_ID,)})
    check_commit(batch, good)
    for links, words in [
        ({}, "does not link"),
        ({"media": (PNG_ID, PNG_ID)}, "exactly the media"),
        ({"media": (content,)}, "exactly the media"),
    ]:
        with pytest.raises(InvalidInput, match=words):
            check_commit(batch, Commit(content=content, created_at=1, links=links))
    text_blob = batch.put(Blob(data={"type": "dialogue", "role": "user", "text": "t"}))
    with pytest.raises(InvalidInput, match="uses none"):
        check_commit(batch, Commit(content=text_blob, created_at=1, links={"media": (PNG_ID,)}))
    # a stored payload holding the bytes inline is not what content_objects stores
    inline = {
        "type": "dialogue",
        "role": "user",
        "text": "",
        "parts": [{"type": "image", "media_type": "image/png", "data": PNG}],
    }
    assert tag(Blob(data=inline)).startswith("invalid:")
    assert tag(Blob(data=PNG)) == "media"
    assert tag(Blob(data=b"")) == "blob"
    # the media tag says what the bytes are; a part declaring another type is refused by the commit check
    found = tag(Blob(data=PNG))
    assert getattr(found, "types", None) == frozenset({"image/png"})
    assert getattr(tag(Blob(data=b"%PDF-1.4 plain")), "types", None) == {"application/pdf", "text/plain"}
    as_jpeg = {
        **blob.data,
        "parts": [
            {"type": "text", "text": "x"},
            {"type": "image", "media_type": "image/jpeg", "media": PNG_ID},
        ],
    }
    wrong = batch.put(Blob(data=as_jpeg))
    with pytest.raises(InvalidInput, match=r"declares media .* as image/jpeg, but its bytes are image/png"):
        check_commit(batch, Commit(content=wrong, created_at=1, links={"media": (PNG_ID,)}))


def test_message_parts_default_empty() -> None:
    assert Message(role="user", content="x").parts == ()
    assert "parts" not in Message(role="user", content="x").to_dict()


def test_forty_commits_of_one_image_store_it_once(tmp_path: Path) -> None:
    """40 more commits carrying one 200 KB image grow the store by less than 3x the image.

    Measured two ways: the sum of the stored objects' canonical bytes (what sync sends and gc counts), and
    the growth of LMDB's data.mdb file (pages, including B-tree and free-page overhead)."""
    image = png(64, 64, size=200_000)
    assert 195_000 < len(image) < 205_000
    path = tmp_path / "store"
    t = Tract.open(str(path), durable=False)
    t.user("start")

    def object_bytes() -> int:
        return sum(len(raw) for _, raw in t.store.iter_raw_objects())

    before_objects, before_file = object_bytes(), os.path.getsize(path / "data.mdb")
    for i in range(41):  # the first carries it in, then 40 more
        t.user([f"look {i}", {"type": "image", "data": image, "media_type": "image/png"}])
    objects_growth = object_bytes() - before_objects
    file_growth = os.path.getsize(path / "data.mdb") - before_file
    t.close()
    assert objects_growth < 3 * len(image), objects_growth
    assert file_growth < 3 * len(image), file_growth
    assert objects_growth > len(image)  # it is stored (once)


def test_a_python_edit_keeps_the_parts_unless_it_gives_its_own(tract: Tract) -> None:
    """Issue 29 item 9: ``t.commit(text, operation="edit")`` dropped the target's images and PDFs (the CLI's
    ``commit --edit`` kept them). One rule for both: an edit keeps the parts unless it gives its own."""
    old = tract.user(["look", {"type": "image", "data": PNG, "media_type": "image/png"}])
    doc = tract.user([{"type": "document", "data": PDF, "media_type": "application/pdf"}, "read"])
    shown = tract._session.message_content(old.commit_id)["parts"]
    edit = tract.commit(
        {"type": "dialogue", "role": "user", "text": "look closely"},
        operation="edit",
        edit_target=old.commit_id,
    )
    assert tract._session.message_content(old.commit_id)["parts"] == [
        {"type": "text", "text": "look closely"},
        shown[1],
    ]
    commit = tract.store.get_commit(edit.commit_id)
    assert commit is not None
    assert commit.links["media"] == (PNG_ID,)
    tract.commit(
        {"type": "dialogue", "role": "user", "text": "now read"}, operation="edit", edit_target=doc.commit_id
    )
    messages = tract.compile().messages
    assert [p.type for p in messages[0].parts] == ["text", "image"]
    assert messages[0].parts[1].data == PNG
    assert [p.type for p in messages[1].parts] == ["document", "text"]
    assert messages[1].parts[0].data == PDF
    assert messages[1].content == "now read"
    # an edit again keeps the parts its target shows now (the latest edit's); its own parts replace them
    tract.commit(
        {"type": "dialogue", "role": "user", "text": "again"}, operation="edit", edit_target=old.commit_id
    )
    assert [p.type for p in tract.compile().messages[0].parts] == ["text", "image"]
    tract.commit(
        {"type": "dialogue", "role": "user", "parts": ["text only"]},
        operation="edit",
        edit_target=old.commit_id,
    )
    assert not tract.compile().messages[0].parts
    assert tract.compile().messages[0].content == "text only"
    # another role or type is another message shape: nothing is kept
    tract.commit(
        {"type": "dialogue", "role": "assistant", "text": "mine"}, operation="edit", edit_target=doc.commit_id
    )
    assert not tract.compile().messages[1].parts


def test_a_tool_result_edit_keeps_its_images_and_documents_unless_it_gives_its_own(tract: Tract) -> None:
    """Issue 32 item 7: ``tool_result(edit=)`` with text (or JSON) wrote the new text alone, so the result's
    images and PDFs left the context, while ``t.commit(..., operation="edit")`` kept them. One rule
    (``content.kept_by_edit``) for every edit: parts are kept unless the edit gives its own."""
    tract.user("take a screenshot and fetch the spec")
    tract.assistant("", tool_calls=[{"id": "c1", "name": "shot", "arguments": {}}])
    image = {"type": "image", "data": PNG, "media_type": "image/png"}
    document = {"type": "document", "data": PDF, "media_type": "application/pdf"}
    result = tract.tool_result("c1", "shot", [image, {"type": "text", "text": "the page"}, document])
    assert isinstance(result, CommitInfo)
    shown = tract._session.message_content(result.commit_id)["parts"]
    edit = tract.tool_result("c1", "shot", "the page, checked", edit=result.commit_id)
    assert isinstance(edit, CommitInfo)
    assert tract._session.message_content(result.commit_id)["parts"] == [
        shown[0],
        {"type": "text", "text": "the page, checked"},
        shown[2],
    ]
    commit = tract.store.get_commit(edit.commit_id)
    assert commit is not None
    assert set(commit.links["media"]) == {shown[0]["media"], shown[2]["media"]}
    message = tract.compile().messages[-1]
    assert [p.type for p in message.parts] == ["image", "text", "document"]
    assert (message.parts[0].data, message.parts[2].data) == (PNG, PDF)
    assert message.content == "the page, checked"
    tract.tool_result("c1", "shot", {"status": "ok"}, edit=result.commit_id)  # a JSON value is text too
    assert [p.type for p in tract.compile().messages[-1].parts] == ["image", "text", "document"]
    assert tract.compile().messages[-1].content == '{"status": "ok"}'
    # Tract.commit of a tool result payload, the same rule
    tract.commit(
        {"type": "dialogue", "role": "tool", "text": "via commit", "tool_call_id": "c1", "name": "shot"},
        operation="edit",
        edit_target=result.commit_id,
    )
    assert [p.type for p in tract.compile().messages[-1].parts] == ["image", "text", "document"]
    # its own parts replace them
    tract.tool_result("c1", "shot", [{"type": "text", "text": "text only"}], edit=result.commit_id)
    assert not tract.compile().messages[-1].parts
    assert tract.compile().messages[-1].content == "text only"
