import pytest

from textkit.wrap import center, columns, dedent, fill, indent, justify, justify_line, truncate, wrap

TEXT = "The quick brown fox jumps over the lazy dog"


def test_wrap_basic():
    assert wrap(TEXT, 15) == ["The quick brown", "fox jumps over", "the lazy dog"]


def test_wrap_exact_fit():
    assert wrap("aaaa bbbb", 9) == ["aaaa bbbb"]
    assert wrap("aaaa bbbb", 8) == ["aaaa", "bbbb"]


def test_wrap_long_word_broken():
    assert wrap("hi abcdefghij", 4) == ["hi", "abcd", "efgh", "ij"]


def test_wrap_long_word_kept():
    assert wrap("hi abcdefghij yo", 4, break_long_words=False) == ["hi", "abcdefghij", "yo"]


def test_wrap_collapses_whitespace_and_empty():
    assert wrap("  a \n\n b  ", 10) == ["a b"]
    assert wrap("", 10) == []


def test_wrap_rejects_bad_width():
    with pytest.raises(ValueError, match="width"):
        wrap("x", 0)


def test_fill_keeps_paragraphs():
    assert fill("one two three\n\n  \nfour five", 8) == "one two\nthree\n\nfour\nfive"
    assert fill("one two three\n\nfour", 8, paragraphs=False) == "one two\nthree\nfour"


def test_justify_line_distributes_left_first():
    assert justify_line("a b c", 8) == "a   b  c"
    assert justify_line("word", 6) == "word  "


def test_justify_line_too_wide():
    with pytest.raises(ValueError, match="wider"):
        justify_line("abc def", 6)


def test_justify_last_line_ragged():
    assert justify(TEXT, 15).splitlines() == ["The quick brown", "fox  jumps over", "the lazy dog"]
    assert justify("", 10) == ""


def test_indent_skips_blank_lines():
    assert indent("a\n\nb\n", "> ") == "> a\n\n> b\n"


def test_indent_predicate_and_first_prefix():
    assert indent("a\n\nb", "  ", predicate=lambda line: True) == "  a\n  \n  b"
    assert indent("item\nmore", "  ", first_prefix="- ") == "- item\n  more"


def test_dedent():
    assert dedent("    a\n      b\n\n    c") == "a\n  b\n\nc"
    assert dedent("  \n ") == "\n"


@pytest.mark.parametrize(
    "length, expected",
    [(50, TEXT), (43, TEXT), (20, "The quick brown..."), (19, "The quick brown..."), (12, "The quick..."),
     (3, "...")],
)
def test_truncate(length, expected):
    assert truncate(TEXT, length) == expected


def test_truncate_cut_at_space_keeps_word():
    assert truncate("abc def ghi", 10) == "abc def..."


def test_truncate_mid_word_and_custom_ellipsis():
    assert truncate(TEXT, 12, whole_words=False) == "The quick..."
    assert truncate(TEXT, 10, ellipsis="…") == "The quick…"
    assert truncate("abcdefghijkl", 8) == "abcde..."


def test_truncate_too_short_for_ellipsis():
    with pytest.raises(ValueError, match="ellipsis"):
        truncate(TEXT, 2)


def test_center():
    assert center("ab", 7, "*") == "**ab***"
    assert center("abc", 7) == "  abc  "
    assert center("toolong", 3) == "toolong"
    with pytest.raises(ValueError):
        center("x", 5, "ab")


def test_columns_column_major():
    items = ["a", "bb", "ccc", "d", "e"]
    assert columns(items, width=12) == "a    d\nbb   e\nccc"
    assert columns([]) == ""
    assert columns(["x", "y"], width=1) == "x\ny"


def test_columns_uses_every_column_that_fits():
    assert columns(["a", "b", "c"], width=8, gap=2) == "a  b  c"


def test_wrap_default_width_is_seventy():
    text = "a" * 35 + " " + "b" * 34
    assert wrap(text) == [text]
    assert len(wrap(text + "b")) == 2
