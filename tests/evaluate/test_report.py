"""`termgym view`: the static HTML report, checked as text and rendered in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from termgym.cli import main as cli_main
from termgym.evaluation import evaluate
from termgym.evaluation.report import histogram_svg, write_report

TASKS = "right-1,wrong-answer,bad-format,too-long,down,injection"


def find_browser() -> str | None:
    """A headless-capable Chromium: Debian's ``chromium``, else Google Chrome (what setup installs on
    Ubuntu). Ubuntu's ``chromium``/``chromium-browser`` are wrappers that want a snap: skipped."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path is None:
            continue
        real = Path(path).resolve()
        if str(real).startswith("/snap/"):
            continue
        with open(real, "rb") as f:
            head = f.read(4096)
        if head.startswith(b"#!") and b"snap" in head:
            continue
        return path
    return None


CHROMIUM = find_browser()


@pytest.fixture
def run_dir(tmp_path, scripted_server, scripted):
    out = tmp_path / "run"
    evaluate(scripted.ENV_ID, agent="openai", output_dir=out, task_ids=TASKS, concurrency=6, progress=False,
             agent_options={"base_url": scripted_server.base_url, "model": "scripted-1", "timeout": 5.0,
                            "max_retries": 0}, infra_retries=0)
    return out


def test_report_holds_summary_histogram_and_every_transcript(run_dir):
    assert cli_main(["view", str(run_dir)]) == 0
    page = (run_dir / "report.html").read_text()
    # Self-contained: no external scripts, styles, images or fonts.
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    assert page.count("<script>") == 1  # ours; the transcript's <script> is text
    assert "&lt;script&gt;document.title = &#x27;pwned&#x27;" in page
    for task_id in TASKS.split(","):
        assert f'data-task="{task_id}"' in page
    assert 'id="histogram"' in page and 'data-count="3"' in page  # three passed episodes at score 1.0
    assert "echo termgym &gt; answer.txt" in page and "&lt;returncode&gt;0&lt;/returncode&gt;" in page
    assert "maximum context length" in page and "EndpointError" in page  # agent and infra errors
    assert "&quot;exit_code&quot;: 0" in page  # the grade


def test_histogram_bins_scores():
    svg = histogram_svg([0.0, 0.05, 0.5, 1.0, 1.0])
    counts = [int(c) for c in re.findall(r'data-count="(\d+)"', svg)]
    assert counts == [2, 0, 0, 0, 0, 1, 0, 0, 0, 2]


def test_view_of_a_missing_run_is_a_clear_error(tmp_path, capsys):
    assert cli_main(["view", str(tmp_path / "nope")]) == 2
    assert "is not a termgym run directory: it has no config.json" in capsys.readouterr().err


def _chromium(url: str, tmp_path: Path) -> tuple[str, list[str]]:
    """The DOM after load and the page's console messages, from headless Chromium."""
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         "--enable-logging=stderr", "--v=0", "--dump-dom", url],
        capture_output=True, text=True, timeout=120)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, console


@pytest.mark.skipif(CHROMIUM is None, reason="needs a Chromium: bash scripts/setup.sh --all (Debian: chromium, Ubuntu: Google Chrome)")
def test_report_renders_in_headless_chromium_without_script_errors(run_dir, tmp_path):
    # The detector works: a page with a script error is caught.
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>")
    _, console = _chromium(broken.as_uri(), tmp_path)
    assert any("Uncaught ReferenceError" in line for line in console), console

    page = write_report(run_dir)
    dom, console = _chromium(page.as_uri(), tmp_path)
    assert console == []
    assert 'data-ready="1"' in dom  # the script ran to its end
    assert '<span id="shown-count">6</span>' in dom
    assert len(re.findall(r'<details class="episode', dom)) == 6
    assert "<title>termgym eval" in dom and "pwned" not in dom.split("</title>")[0]

    # Shared links: ?show= filters, #anchor opens that episode.
    dom, console = _chromium(page.as_uri() + "?show=failed#ep-wrong-answer__a0", tmp_path)
    assert console == []
    assert '<span id="shown-count">1</span>' in dom
    assert re.search(r'<details class="episode" id="ep-wrong-answer__a0"[^>]*open', dom)
    assert len(re.findall(r'<details class="episode hidden"', dom)) == 5
