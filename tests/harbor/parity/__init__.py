"""Parity with Harbor 0.26: termgym's verdicts next to those of Harbor's own code.

:func:`harbor_python` finds (or creates, via ``scripts/setup-harbor.sh``) the separate venv with
Harbor; :func:`harbor_judge` sends cases to ``harbor_judge.py`` running there.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
JUDGE = Path(__file__).with_name("harbor_judge.py")


def harbor_python() -> str:
    """The Harbor venv's python (created on first use; raises with the setup script's error)."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "setup-harbor.sh")], capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/setup-harbor.sh failed: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def harbor_judge(python: str, cases: list[dict]) -> list[dict]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([python, str(JUDGE)], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=300, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"Harbor's judge failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)
