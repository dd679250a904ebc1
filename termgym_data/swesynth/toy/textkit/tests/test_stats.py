import pytest

from textkit.stats import (
    closest,
    flesch_reading_ease,
    levenshtein,
    sentences,
    similarity,
    summary,
    syllables,
    top_words,
    word_count,
    words,
)


def test_words_keep_inner_apostrophes():
    assert words("It's a dog's life, isn't it?") == ["It's", "a", "dog's", "life", "isn't", "it"]
    assert word_count("  one,two  three ") == 3
    assert word_count("") == 0


def test_sentences_basic():
    assert sentences("Hi there. How are you? Fine!") == ["Hi there.", "How are you?", "Fine!"]


def test_sentences_abbreviations_and_initials():
    text = "Dr. Smith met J. Doe at 5 p.m. today. They talked."
    assert sentences(text) == ["Dr. Smith met J. Doe at 5 p.m. today.", "They talked."]


def test_sentences_without_final_punctuation():
    assert sentences("First one. second part") == ["First one. second part"]
    assert sentences("Done. Tail") == ["Done.", "Tail"]
    assert sentences("") == []


@pytest.mark.parametrize(
    "word, count",
    [("cat", 1), ("table", 2), ("make", 1), ("water", 2), ("beautiful", 3), ("wanted", 2),
     ("jumped", 1), ("free", 1), ("rhythm", 1), ("", 0), ("123", 0), ("education", 4)],
)
def test_syllables(word, count):
    assert syllables(word) == count


def test_flesch_reading_ease():
    assert flesch_reading_ease("The cat sat on the mat.") == 116.1
    assert flesch_reading_ease("") is None


def test_flesch_easier_text_scores_higher():
    easy = "The dog ran. The cat sat."
    hard = "Institutional considerations necessitate comprehensive organizational restructuring."
    assert flesch_reading_ease(easy) > flesch_reading_ease(hard)


def test_top_words():
    text = "Apple banana apple. Cherry banana apple the the the"
    assert top_words(text) == [("apple", 3), ("banana", 2), ("cherry", 1)]
    assert top_words(text, n=1) == [("apple", 3)]
    assert top_words(text, stopwords=()) == [("apple", 3), ("the", 3), ("banana", 2), ("cherry", 1)]
    assert top_words("a bb ccc bb", min_length=2, stopwords=()) == [("bb", 2), ("ccc", 1)]


@pytest.mark.parametrize(
    "a, b, distance",
    [("kitten", "sitting", 3), ("", "abc", 3), ("abc", "", 3), ("same", "same", 0), ("flaw", "lawn", 2), ("ab", "ba", 2)],
)
def test_levenshtein(a, b, distance):
    assert levenshtein(a, b) == distance
    assert levenshtein(b, a) == distance


def test_similarity():
    assert similarity("", "") == 1.0
    assert similarity("abcd", "abcf") == 0.75
    assert similarity("abc", "xyz") == 0.0


def test_closest():
    commands = ["status", "stash", "commit", "checkout"]
    assert closest("stauts", commands) == "status"
    assert closest("COMIT", commands) == "commit"
    assert closest("xyzzy", commands) is None
    assert closest("stat", ["stash", "status"], max_distance=2) == "stash"


def test_summary():
    result = summary("One two three. Four five.")
    assert result["characters"] == 25
    assert result["words"] == 5
    assert result["sentences"] == 2
    assert result["average_word_length"] == 3.8
    assert summary("")["average_word_length"] == 0.0
