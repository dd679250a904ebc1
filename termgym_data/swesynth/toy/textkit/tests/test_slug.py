import pytest

from textkit.slug import fold_to_ascii, slugify, unique_slug


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello, World!", "hello-world"),
        ("  Crème brûlée  ", "creme-brulee"),
        ("Straße & Co", "strasse-and-co"),
        ("Don't stop", "dont-stop"),
        ("Python 3.11 released", "python-3-11-released"),
        ("---", ""),
        ("Ærøskøbing", "aeroskobing"),
    ],
)
def test_slugify(text, expected):
    assert slugify(text) == expected


def test_slugify_separator_and_case():
    assert slugify("Hello World", separator="_") == "hello_world"
    assert slugify("Hello World", lowercase=False) == "Hello-World"


def test_slugify_stopwords():
    assert slugify("The Art of War", stopwords={"the", "of"}) == "art-war"


@pytest.mark.parametrize(
    "length, expected",
    [(11, "hello-world"), (12, "hello-world"), (10, "hello"), (5, "hello"), (6, "hello"), (3, "hel")],
)
def test_slugify_max_length_cuts_at_word(length, expected):
    assert slugify("Hello world again", max_length=length) == expected


def test_slugify_rejects_bad_max_length():
    with pytest.raises(ValueError, match="max_length"):
        slugify("x", max_length=0)


def test_fold_to_ascii_keeps_case():
    assert fold_to_ascii("Émile ÆSIR") == "Emile AESIR"


def test_unique_slug_numbers_collisions():
    taken = {"intro", "intro-2"}
    assert unique_slug("Intro", taken) == "intro-3"
    assert unique_slug("Other", taken) == "other"


def test_unique_slug_empty_title():
    assert unique_slug("!!!", set()) == "item"
    assert unique_slug("!!!", {"item"}) == "item-2"


def test_unique_slug_respects_max_length():
    assert unique_slug("abcdef", {"abcdef"}, max_length=6) == "abcd-2"


def test_slugify_max_length_one():
    assert slugify("abc def", max_length=1) == "a"
