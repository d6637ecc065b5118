"""The HTML builder escapes everything that is not Markup it made itself."""

from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import given
from hypothesis import strategies as st

from tractkv.view.html import Markup, Template, el, escape, join, page


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(markup: str) -> _Collect:
    parser = _Collect()
    parser.feed(markup)
    parser.close()
    return parser


TEXT = st.text(alphabet=st.characters(exclude_characters="\r"))  # HTML parsers normalize CR


@given(TEXT)
def test_any_text_child_reads_back_as_that_text_and_adds_no_tag(text: str) -> None:
    parsed = parse(el("p", text))
    assert parsed.tags == ["p"]
    assert "".join(parsed.text) == text


@given(TEXT, TEXT)
def test_any_attribute_value_stays_one_attribute(value: str, text: str) -> None:
    parsed = parse(el("a", text, href=value, title=value))
    assert parsed.tags == ["a"]
    assert [name for name, _ in parsed.attrs] == ["href", "title"]
    assert parsed.attrs[0][1] == value


def test_script_text_is_escaped_and_markup_passes_through() -> None:
    hostile = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    out = el(
        "div", hostile, el("b", "bold"), None, ["a", 1], class_="x", data_id="7", hidden=True, title=None
    )
    assert out == (
        '<div class="x" data-id="7" hidden>&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x '
        "onerror=&quot;alert(2)&quot;&gt;<b>bold</b>a1</div>"
    )
    assert escape(Markup("<i>kept</i>")) == "<i>kept</i>"
    assert Markup("<i>") + "<b>" == "<i>&lt;b&gt;"
    assert join("<", Markup("<br>")) == "&lt;<br>"
    assert el("circle", r=4) == '<circle r="4" />'
    assert el("input", name="q") == '<input name="q">'


def test_page_has_no_inline_script_and_escapes_the_title() -> None:
    doc = page("<t>", el("p", "body"), live="/ui/?fragment=1", live_ref="refs/heads/<x>")
    assert doc.startswith("<!DOCTYPE html>")
    assert "<title>&lt;t&gt; · tractkv</title>" in doc
    assert '<script src="/ui/static/app.js" defer></script>' in doc
    assert doc.count("<script") == 1
    assert 'data-live-ref="refs/heads/&lt;x&gt;"' in doc


@given(TEXT, TEXT)
def test_a_template_escapes_every_hole_as_el_does(value: str, text: str) -> None:
    """html.Template (the graph rows' fast path) fills its holes as el() would: same HTML, one tag, one
    attribute, the text read back as given; Markup passes, ints are digits, None is nothing."""
    row = Template('<a href="{}" title="{}">{}{}{}</a>')
    out = row(value, value, text, Markup("<b>x</b>"), 7)
    assert out == el("a", text, Markup("<b>x</b>"), 7, href=value, title=value)
    parsed = parse(out)
    assert parsed.tags == ["a", "b"]
    assert [name for name, _ in parsed.attrs] == ["href", "title"]
    assert parsed.attrs[0][1] == value
    assert "".join(parsed.text) == text + "x7"
    assert Template("<p>{}</p>")(None) == "<p></p>"
