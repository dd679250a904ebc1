import pytest

from textkit.cases import (
    camel_case,
    constant_case,
    humanize,
    kebab_case,
    pascal_case,
    snake_case,
    split_words,
    swap_case_style,
    title_case,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("parseHTTPResponse2", ["parse", "HTTP", "Response2"]),
        ("hello_world-again.now", ["hello", "world", "again", "now"]),
        ("XMLHttpRequest", ["XML", "Http", "Request"]),
        ("  spaced   out ", ["spaced", "out"]),
        ("version 2 update", ["version", "2", "update"]),
        ("", []),
    ],
)
def test_split_words(text, expected):
    assert split_words(text) == expected


def test_snake_and_kebab_and_constant():
    assert snake_case("userID Lookup") == "user_id_lookup"
    assert kebab_case("MyComponentName") == "my-component-name"
    assert constant_case("max retries") == "MAX_RETRIES"


def test_pascal_and_camel():
    assert pascal_case("http server") == "HttpServer"
    assert pascal_case("http server", acronyms=["http"]) == "HTTPServer"
    assert camel_case("HTTP server config") == "httpServerConfig"
    assert camel_case("") == ""
    assert camel_case("single") == "single"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("the lord of the rings", "The Lord of the Rings"),
        ("a tale of two cities", "A Tale of Two Cities"),
        ("what are you looking at", "What Are You Looking At"),
        ("my iPhone and NASA", "My iPhone and NASA"),
        ("state-of-the-art design", "State-Of-The-Art Design"),
        ("", ""),
    ],
)
def test_title_case(text, expected):
    assert title_case(text) == expected


def test_title_case_custom_small_words():
    assert title_case("war and peace", small_words=[]) == "War And Peace"


def test_swap_case_style():
    assert swap_case_style("max_value") == "maxValue"
    assert swap_case_style("maxValue") == "max_value"
    assert swap_case_style("MAX_VALUE") == "max_value"


@pytest.mark.parametrize("name, label", [("user_id", "User ID"), ("firstName", "First name"), ("id", "Id"), ("", "")])
def test_humanize(name, label):
    assert humanize(name) == label
