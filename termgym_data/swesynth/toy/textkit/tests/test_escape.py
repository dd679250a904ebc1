import pytest

from textkit.escape import Markup, attributes, escape, strip_tags, unescape


def test_escape_specials():
    assert escape('<a href="x">Tom & \'Jerry\'</a>') == "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#x27;Jerry&#x27;&lt;/a&gt;"


def test_escape_without_quotes():
    assert escape("\"it's\" <b>", quote=False) == "\"it's\" &lt;b&gt;"


def test_escape_returns_markup_and_leaves_markup_alone():
    assert isinstance(escape("x"), Markup)
    assert escape(Markup("<b>ok</b>")) == "<b>ok</b>"


def test_escape_none_and_numbers():
    assert escape(None) == ""
    assert escape(42) == "42"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("&amp;&lt;&gt;&quot;", "&<>\""),
        ("&#65;&#x42;&#X43;", "ABC"),
        ("caf&eacute;", "caf&eacute;"),
        ("&copy; 2024 &mdash; all", "\u00a9 2024 \u2014 all"),
        ("&AMP;", "&"),
        ("&#0;", "\ufffd"),
        ("&#1114112;", "\ufffd"),
        ("a & b", "a & b"),
    ],
)
def test_unescape(text, expected):
    assert unescape(text) == expected


def test_unescape_round_trips_escape():
    original = "<script>alert('x & y')</script>"
    assert unescape(escape(original)) == original


def test_strip_tags_plain():
    assert strip_tags("<p>Hello <b>world</b></p><p>Bye</p>") == "Hello worldBye"


def test_strip_tags_removes_comments_and_unescapes():
    assert strip_tags("a<!-- hidden\nnote -->b &amp; c") == "ab & c"


def test_strip_tags_keep_breaks():
    html = "<h1>Title</h1><p>First   para</p>\n\n<p>Second</p><span>inline</span>"
    assert strip_tags(html, keep_breaks=True) == "Title\n\nFirst para\n\nSecond\ninline"


def test_strip_tags_inline_tags_join():
    assert strip_tags("<p>a<b>b</b><i>c</i></p>", keep_breaks=True) == "abc"


def test_strip_tags_collapses_spaces():
    assert strip_tags("  a \t  b  ") == "a b"


def test_attributes():
    assert attributes({"id": "x", "class": "a&b", "hidden": True, "title": None, "open": False}) == (
        ' class="a&amp;b" hidden id="x"'
    )
    assert attributes({}) == ""
