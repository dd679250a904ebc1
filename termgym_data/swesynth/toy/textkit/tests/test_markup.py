import pytest

from textkit.markup import Renderer, render_inline, safe_url, to_html


@pytest.mark.parametrize(
    "url, expected",
    [
        ("https://example.org", "https://example.org"),
        ("mailto:a@b.c", "mailto:a@b.c"),
        ("docs/page.html", "docs/page.html"),
        ("/abs", "/abs"),
        ("javascript:alert(1)", "#"),
        ("JAVASCRIPT:alert(1)", "#"),
        ("data:text/html,x", "#"),
    ],
)
def test_safe_url(url, expected):
    assert safe_url(url) == expected


@pytest.mark.parametrize(
    "text, html",
    [
        ("plain & simple", "plain &amp; simple"),
        ("*em* and **strong**", "<em>em</em> and <strong>strong</strong>"),
        ("`a < b` and *x*", "<code>a &lt; b</code> and <em>x</em>"),
        ("`*not em*`", "<code>*not em*</code>"),
        ("[site](https://x.org)", '<a href="https://x.org">site</a>'),
        ("[**bold** link](/p)", '<a href="/p"><strong>bold</strong> link</a>'),
        ("![logo](img.png)", '<img alt="logo" src="img.png">'),
        ("[bad](javascript:x)", '<a href="#">bad</a>'),
        ("2 * 3 * 4", "2 * 3 * 4"),
        ("line end  ", "line end<br>"),
        ('say "hi"', 'say "hi"'),
    ],
)
def test_render_inline(text, html):
    assert render_inline(text) == html


@pytest.mark.parametrize(
    "source, html",
    [
        ("# Title", '<h1 id="title">Title</h1>'),
        ("### Sub *part* ###", '<h3 id="sub-part">Sub <em>part</em></h3>'),
        ("####### seven", "<p>####### seven</p>"),
        ("#nospace", "<p>#nospace</p>"),
    ],
)
def test_headings(source, html):
    assert to_html(source) == html


def test_heading_ids_are_unique():
    assert to_html("# Intro\n# Intro") == '<h1 id="intro">Intro</h1>\n<h1 id="intro-2">Intro</h1>'


def test_heading_ids_can_be_disabled():
    assert to_html("## Hi", heading_ids=False) == "<h2>Hi</h2>"


def test_paragraphs_split_on_blank_lines():
    assert to_html("one\ntwo\n\nthree") == "<p>one\ntwo</p>\n<p>three</p>"


def test_paragraph_interrupted_by_heading():
    assert to_html("text\n# Head") == '<p>text</p>\n<h1 id="head">Head</h1>'


@pytest.mark.parametrize("rule", ["---", "***", "- - -", "_____"])
def test_horizontal_rules(rule):
    assert to_html(rule) == "<hr>"


def test_bullet_list_with_continuation():
    assert to_html("- one\n  more\n* two") == "<ul>\n<li>one more</li>\n<li>two</li>\n</ul>"


def test_ordered_list_start():
    assert to_html("1. a\n2. b") == "<ol>\n<li>a</li>\n<li>b</li>\n</ol>"
    assert to_html("4) d\n5) e") == '<ol start="4">\n<li>d</li>\n<li>e</li>\n</ol>'


def test_list_kinds_do_not_mix():
    assert to_html("- a\n1. b") == "<ul>\n<li>a</li>\n</ul>\n<ol>\n<li>b</li>\n</ol>"


def test_blockquote_renders_inner_blocks():
    assert to_html("> # Q\n> text\n>\n> - item") == (
        '<blockquote>\n<h1 id="q">Q</h1>\n<p>text</p>\n<ul>\n<li>item</li>\n</ul>\n</blockquote>'
    )


def test_fenced_code_escapes_and_keeps_lines():
    assert to_html("```python\nif a < b:\n    *x*\n```") == (
        '<pre><code class="language-python">if a &lt; b:\n    *x*</code></pre>'
    )


def test_unclosed_fence_runs_to_end():
    assert to_html("```\ncode") == "<pre><code>code</code></pre>"


def test_code_then_paragraph():
    assert to_html("```\nx\n```\nafter") == "<pre><code>x</code></pre>\n<p>after</p>"


def test_table_of_contents():
    renderer = Renderer()
    renderer.render("# A\n## B\n#### Deep\n## B")
    assert renderer.table_of_contents() == (
        '<ul>\n<li><a href="#a">A</a></li>\n  <li><a href="#b">B</a></li>\n  <li><a href="#b-2">B</a></li>\n</ul>'
    )
    assert "deep" in renderer.table_of_contents(max_level=4)


def test_table_of_contents_empty():
    assert Renderer().table_of_contents() == ""
