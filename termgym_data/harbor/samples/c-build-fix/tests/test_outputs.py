import subprocess


def run(cmd, **kw):
    return subprocess.run(cmd, cwd="/app", capture_output=True, text=True, **kw)


def test_clean_build():
    run(["make", "clean"])
    result = run(["make"])
    assert result.returncode == 0, result.stdout + result.stderr


def test_counts_words_and_lines():
    result = run(["/app/wordstat"], input="the quick brown\nfox jumps over\nthe lazy dog\n")
    assert result.stdout == "lines 3\nwords 9\nlongest quick\n"


def test_last_word_without_newline():
    result = run(["/app/wordstat"], input="alpha beta\ngamma epsilon")
    assert result.stdout == "lines 1\nwords 4\nlongest epsilon\n"
