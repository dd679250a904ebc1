"""Run inside the Harbor venv: judge cases with Harbor's own code and print the verdicts as JSON.

Reads a JSON list of cases on stdin (with ``--serve``: one list per line, answered line by line, so
Harbor is imported once for a whole test module); each is one of

* ``{"kind": "reward", "files": {"reward.json": "...", "reward.txt": "..."}, "verifier_timed_out": bool}``:
  the files the verifier left, judged by Harbor's ``Verifier`` reward parsers, and the trial's
  validity by Harbor's error policy (``TrialResult.reward_valid``'s rule);
* ``{"kind": "reply", "text": "..."}``: a Terminus-2 reply parsed by Harbor's JSON parser;
* ``{"kind": "tb1", "output": "...", "timed_out": bool}``: a run-tests.sh output judged by
  Terminal-Bench 1's ``PytestParser`` and its harness's resolved rule.

This file imports Harbor; termgym never does (it is not part of the package).
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
from pathlib import Path

from harbor.agents.terminus_2.terminus_json_plain_parser import TerminusJSONPlainParser
from harbor.models.trial.error_policy import policy_for
from harbor.models.trial.paths import TrialPaths
from harbor.models.verifier.result import VerifierResult
from harbor.verifier.verifier import Verifier


def judge_reward(case: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        paths = TrialPaths(Path(tmp))
        paths.verifier_dir.mkdir(parents=True, exist_ok=True)
        for name, text in (case.get("files") or {}).items():
            (paths.verifier_dir / name).write_text(text)
        verifier = Verifier.__new__(Verifier)  # only the parsers are used: no environment needed
        verifier.trial_paths = paths
        exception = None
        rewards = None
        if case.get("verifier_timed_out"):
            exception = "VerifierTimeoutError"  # Harbor cancels verify(): nothing is parsed
        else:
            try:
                # The same order as Verifier.verify(): reward.json first, then reward.txt.
                if paths.reward_json_path.exists():
                    rewards = VerifierResult(rewards=verifier._parse_reward_json()).rewards
                elif paths.reward_text_path.exists():
                    rewards = VerifierResult(rewards=verifier._parse_reward_text()).rewards
                else:
                    exception = "RewardFileNotFoundError"
            except Exception as exc:  # noqa: BLE001 - the exception's type is the verdict
                exception = type(exc).__name__
    valid = bool(rewards) and (exception is None or policy_for(exception).has_valid_reward)
    return {"rewards": rewards if valid else None, "valid": valid, "exception": exception}


def judge_reply(case: dict) -> dict:
    result = TerminusJSONPlainParser().parse_response(case["text"])
    return {
        "error": bool(result.error),
        "task_complete": bool(result.is_task_complete) if not result.error else None,
        "commands": [[c.keystrokes, min(c.duration, 60)] for c in result.commands] if not result.error else None,
    }


@functools.lru_cache(maxsize=1)
def _tb1_parser():
    """Terminal-Bench 1's PytestParser, imported without running its package's heavy __init__ (once:
    the stub packages it leaves in ``sys.modules`` cannot be located again)."""
    import importlib
    import importlib.util
    import types

    spec = importlib.util.find_spec("terminal_bench")  # locates the package without importing it
    root = Path(spec.submodule_search_locations[0])
    for name, folder in (("terminal_bench", root), ("terminal_bench.parsers", root / "parsers"),
                         ("terminal_bench.utils", root / "utils")):
        module = sys.modules.setdefault(name, types.ModuleType(name))
        module.__path__ = [str(folder)]
    return importlib.import_module("terminal_bench.parsers.pytest_parser").PytestParser()


def judge_tb1(case: dict) -> dict:
    parser = _tb1_parser()
    from terminal_bench.parsers.base_parser import UnitTestStatus

    if case.get("timed_out"):  # FailureMode.TEST_TIMEOUT: the harness returns before parsing
        return {"resolved": False, "tests": None}
    try:
        results = parser.parse(case["output"])
    except ValueError:  # no summary: FailureMode.PARSE_ERROR
        return {"resolved": False, "tests": None}
    resolved = all(r == UnitTestStatus.PASSED for r in results.values())
    return {"resolved": resolved, "tests": {k: v.value for k, v in results.items()}}


JUDGES = {"reward": judge_reward, "reply": judge_reply, "tb1": judge_tb1}
#: ``--serve``: the prefix of each verdict line (anything else on stdout is not a verdict).
MARKER = "HARBOR-JUDGE "


def main() -> None:
    if sys.argv[1:] == ["--serve"]:  # one JSON list of cases per line in, one line of verdicts out
        for line in sys.stdin:
            if line.strip():
                sys.stdout.write(MARKER + json.dumps([JUDGES[c["kind"]](c) for c in json.loads(line)]) + "\n")
                sys.stdout.flush()
        return
    cases = json.load(sys.stdin)
    json.dump([JUDGES[c["kind"]](c) for c in cases], sys.stdout)


if __name__ == "__main__":
    main()
