"""Parity with Harbor 0.26: termgym's verdicts next to those of Harbor's own code.

:func:`harbor_python` finds (or creates, via ``scripts/setup-harbor.sh``) the separate venv with
Harbor; :class:`HarborJudge` keeps ``harbor_judge.py --serve`` running there and sends it cases
(importing Harbor takes seconds, so once per test module).
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


class HarborJudge:
    """``harbor_judge.py --serve`` kept running: ``judge(cases)`` gives the verdicts without
    importing Harbor again for each call."""

    def __init__(self, python: str) -> None:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self.proc = subprocess.Popen([python, str(JUDGE), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)

    def __call__(self, cases: list[dict]) -> list[dict]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cases) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("HARBOR-JUDGE "):
                return json.loads(line[len("HARBOR-JUDGE "):])
        raise RuntimeError(f"Harbor's judge ended: {self.proc.stderr.read().strip()[-2000:] if self.proc.stderr else ''}")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
