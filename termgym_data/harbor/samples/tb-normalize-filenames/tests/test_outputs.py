from pathlib import Path

PHOTOS = Path("/app/photos")
EXPECTED = {
    "summer-holiday-01.jpg": "jpeg-bytes-1\n",
    "summer-holiday-02.jpg": "jpeg-bytes-2\n",
    "beach-sunset.png": "png-bytes-3\n",
    "already-clean.jpg": "jpeg-bytes-4\n",
}


def test_renamed_files():
    names = sorted(p.name for p in PHOTOS.iterdir() if p.is_file())
    assert names == sorted(EXPECTED)


def test_contents_unchanged():
    for name, content in EXPECTED.items():
        assert (PHOTOS / name).read_text() == content


def test_raw_untouched():
    assert (PHOTOS / "raw" / "Keep Me.CR2").read_text() == "raw-bytes\n"
