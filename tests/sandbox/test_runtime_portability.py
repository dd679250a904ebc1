"""The same bundled SWE-SYNTH task grades identically whatever the host's system Python has.

Issue 20's failure, reproduced for real: on a host whose ``/usr`` has no pytest, the oracle's fix
"failed" (grade 0) because the sandbox used the host's ``python3 -m pytest``. Here a private mount
namespace hides the host's pytest (``/usr/lib/python3/dist-packages/{pytest,_pytest}`` become
empty), the host's own ``python3 -m pytest`` is checked to fail there, and the oracle episode is
played on the local backend: on the pinned runtime it must score 1 exactly as on an unmodified
host; on the host's ``/usr`` (``runtime="host"``) it cannot pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TASK_ID = "ledgerly-03e7642999"

_PLAY = textwrap.dedent('''
    import json, subprocess, sys, warnings
    hide = sys.argv[1] == "hide-pytest"
    if hide:
        for d in ("/usr/lib/python3/dist-packages/pytest", "/usr/lib/python3/dist-packages/_pytest"):
            subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs", d], check=True)
    host = subprocess.run(["/usr/bin/python3", "-m", "pytest", "--version"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, cwd="/")
    warnings.simplefilter("ignore", RuntimeWarning)
    from termgym.env import TerminalEnv, oracle_actions
    from termgym.tasks.swesynth import default_suite
    out = {"host_pytest_rc": host.returncode}
    for runtime in sys.argv[3:]:
        env = TerminalEnv(default_suite("toy"), sandbox_options={"runtime": runtime})
        try:
            _, info = env.reset(options={"task_id": sys.argv[2]})
            for action in oracle_actions(env):
                *_, step_info = env.step(action)
            grade = step_info["grade"]
            out[runtime] = {"runtime": info["runtime"], "score": grade["score"],
                            "all_result": grade.get("all_result"), "error": grade.get("error")}
        finally:
            env.close()
    print("RESULT " + json.dumps(out))
''')


def play(hide_pytest: bool, *runtimes: str, cache: Path) -> dict:
    argv = [sys.executable, "-c", _PLAY, "hide-pytest" if hide_pytest else "keep", TASK_ID, *runtimes]
    if hide_pytest:
        argv = ["unshare", "--mount", "--propagation", "private", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "TERMGYM_CACHE_DIR": str(cache)})
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.slow
def test_oracle_grades_one_on_a_host_without_pytest(tmp_path):
    from termgym.sandbox.runtime import current_version

    if not Path("/usr/lib/python3/dist-packages/pytest").is_dir():
        pytest.fail("this test hides the host's Debian pytest; install python3-pytest on the host", pytrace=False)
    normal = play(False, "pinned", cache=tmp_path)
    bare = play(True, "pinned", "host", cache=tmp_path)
    assert normal["host_pytest_rc"] == 0 and bare["host_pytest_rc"] != 0  # the host really lost pytest
    # on the pinned runtime the host's Python does not matter: the same grade, the same tests
    assert normal["pinned"]["score"] == bare["pinned"]["score"] == 1.0, (normal, bare)
    assert normal["pinned"]["all_result"] == bare["pinned"]["all_result"]
    assert normal["pinned"]["runtime"] == bare["pinned"]["runtime"] == current_version()
    # on the host's /usr the oracle cannot pass there (issue 20's silent 0, or an infra error)
    assert bare["host"]["runtime"] == "host" and bare["host"]["score"] != 1.0, bare
