from pathlib import Path

EXPECTED = ["E2001 3", "E1050 2", "E3003 2", "E0999 1"]


def test_errors_file_exists():
    assert Path("/app/errors.txt").is_file()


def test_errors_content():
    lines = [line.strip() for line in Path("/app/errors.txt").read_text().splitlines() if line.strip()]
    assert lines == EXPECTED
