"""No observation carries bash's job notices about processes an earlier command left behind.

When a timeout kills a command's background jobs, the sandbox shell learns of their deaths later
and, left alone, prints ``bash: line 3: 7 Killed sleep 1000`` into whatever command runs next.
Under load that is the usual order of events, so the case runs many times at once.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from termgym.sandbox import Limits, SandboxSpec

NOTICE = re.compile(r"Killed|Terminated|line \d+:")
SANDBOXES = 6
ROUNDS = 3


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["persistent", "stateless"])
def test_killed_jobs_leave_no_notice_in_later_observations(make, mode):
    boxes = [make(SandboxSpec(limits=Limits(pids=64)), mode=mode, start=False) for _ in range(SANDBOXES)]

    def episode(box) -> list[tuple[str, str]]:
        box.start()
        seen = []
        for _ in range(ROUNDS):
            killed = box.exec("sleep 1000 & sleep 1000 & sleep 1000", timeout=0.5)
            assert killed.timed_out and killed.exit_code == 124, killed
            seen.append((killed.output, box.exec("echo next").output))
            seen.append((killed.output, box.exec("pgrep -c -f 'sleep 1000' || true").output))
        return seen

    with ThreadPoolExecutor(SANDBOXES) as pool:
        pairs = [pair for seen in pool.map(episode, boxes) for pair in seen]
    outputs = [later for _, later in pairs]
    leaked = [out for out in outputs if NOTICE.search(out)]
    assert not leaked, f"{len(leaked)} of {len(outputs)} observations carry job notices, e.g. {leaked[0]!r}"
    unexpected = [pair for pair in pairs if pair[1] not in ("next\n", "0\n")]
    assert not unexpected, f"(timed-out output, next output): {unexpected}"
