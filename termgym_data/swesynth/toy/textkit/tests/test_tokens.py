import pytest

from textkit.tokens import Token, TokenizeError, tokenize


def kinds_values(source):
    return [(t.kind, t.value) for t in tokenize(source)[:-1]]


def test_simple_expression():
    assert kinds_values("a + 12") == [("NAME", "a"), ("OP", "+"), ("NUMBER", 12)]


@pytest.mark.parametrize(
    "source, value",
    [("3.5", 3.5), (".5", 0.5), ("1e3", 1000.0), ("2.5E-2", 0.025), ("7", 7), ("1e+2", 100.0)],
)
def test_numbers(source, value):
    (token,) = tokenize(source)[:-1]
    assert token.kind == "NUMBER"
    assert token.value == value
    assert type(token.value) is type(value)


def test_number_followed_by_dot_name_is_attribute_access():
    assert kinds_values("1.real") == [("NUMBER", 1), ("OP", "."), ("NAME", "real")]


def test_invalid_number():
    with pytest.raises(TokenizeError, match="invalid number"):
        tokenize("12abc")


def test_longest_operator_wins():
    assert [t.value for t in tokenize("a<=b**c//d!=e")[:-1]] == ["a", "<=", "b", "**", "c", "//", "d", "!=", "e"]


def test_keywords_and_names():
    assert kinds_values("not x_1 and true") == [
        ("KEYWORD", "not"), ("NAME", "x_1"), ("KEYWORD", "and"), ("KEYWORD", "true")
    ]


@pytest.mark.parametrize(
    "source, value",
    [("'hi'", "hi"), ('"a\\nb"', "a\nb"), ("'it\\'s'", "it's"), ('"\\u00e9t\\u00E9"', "été"), ("''", "")],
)
def test_strings(source, value):
    assert tokenize(source)[0] == Token("STRING", value, 1, 1)


@pytest.mark.parametrize(
    "source, message", [("'abc", "unterminated"), ("'a\nb'", "unterminated"), ("'\\q'", "unknown escape"),
                        ("'\\u12'", "bad \\\\u escape")]
)
def test_string_errors(source, message):
    with pytest.raises(TokenizeError, match=message):
        tokenize(source)


def test_positions_track_lines_and_columns():
    tokens = tokenize("a +\n  bb")
    assert [(t.value, t.line, t.column) for t in tokens] == [("a", 1, 1), ("+", 1, 3), ("bb", 2, 3), (None, 2, 5)]


def test_comments_are_skipped():
    assert kinds_values("a # comment + b\nc") == [("NAME", "a"), ("NAME", "c")]


def test_unexpected_character_position():
    with pytest.raises(TokenizeError) as info:
        tokenize("a\n  $")
    assert (info.value.line, info.value.column) == (2, 3)
    assert str(info.value) == "unexpected character '$' at line 2, column 3"


def test_eof_token_always_present():
    assert tokenize("") == [Token("EOF", None, 1, 1)]
