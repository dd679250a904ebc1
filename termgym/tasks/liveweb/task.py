"""One LIVEWEB task: a few questions about the simulated sites, for one episode at a time.

Lifecycle with :class:`termgym.TerminalEnv`: ``sandbox_spec()`` opens the episode on the shared
world server (its own port, a fresh :class:`SimClock`) and asks the sandbox for one service per
site (``coingecko.test:80`` and friends, relayed to that port); ``setup()`` starts the clock;
``grade()`` scores the submission against the world at the clock's current time; ``teardown()``
closes the episode. The world itself lives only in the host process: nothing in the sandbox's
filesystem holds data or answers.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from termgym.sandbox.base import SandboxSpec, ServicePort
from termgym.tasks.base import Grade, GradingContext, Task
from termgym.tasks.liveweb.answers import sources
from termgym.tasks.liveweb.grading import SUCCESS_THRESHOLD, LLMValidator, grade_answers, parse_submission
from termgym.tasks.liveweb.noise import HISTORY, TICK, stable_hash
from termgym.tasks.liveweb.questions import Question
from termgym.tasks.liveweb.server import Episode, WorldServer, shared_server
from termgym.tasks.liveweb.sites import SITES, collection_spec
from termgym.tasks.liveweb.sites.base import API_MODES
from termgym.tasks.liveweb.world import SimClock, World

#: Where the page reader is installed inside the sandbox (and put on PATH).
BROWSE_DIR = "/opt/liveweb/bin"
SANDBOX_PATH = f"{BROWSE_DIR}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SUBMIT_SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_HERE = Path(__file__).resolve().parent


def browse_script() -> str:
    """Source of the ``browse`` page reader installed into every LIVEWEB sandbox."""
    return (_HERE / "browse.py").read_text()


def render_instruction(questions: list[Question], hosts: list[str], *, live: bool = False, api: str = "paged") -> str:
    """The task text: where the sites are, the questions, and the answer format."""
    where = ("These real websites are reachable from your terminal" if live else
             "These simulated websites are reachable over HTTP from your terminal (there is no other network)")
    keys = ", ".join(f'"{q.qid}": ...' for q in questions)
    lines = [
        "Answer the questions below by looking up current data on the web.",
        "",
        f"{where}: " + ", ".join(f"http://{h}" for h in hosts) + ".",
        ("Use their public JSON APIs (or pages) as you see fit." if live else
         "Each site has HTML pages (list pages are paginated and may be a few minutes behind; item pages are "
         "live) and a JSON API under /api (start with /api to see what it offers"
         + ("; collections are served a page at a time, and /api/<collection>/<key> gives one record)."
            if api == "paged" else ").")),
        "Read a page as text with `browse URL` (`browse URL N` follows link [N]), or use curl and python3.",
        "The data changes over time: answers are checked against the sites at the moment you submit.",
        "",
        "Questions:",
    ]
    lines += [f"{i}. {q.text}" for i, q in enumerate(questions, 1)]
    lines += [
        "",
        f"Submit one JSON object with the keys {', '.join(q.qid for q in questions)}: {{{keys}}}.",
        "Numbers as plain numbers (no units or thousands separators needed): values as the site shows them, "
        "computed values to at least 4 significant digits. Names as strings exactly as the site shows them "
        "(one name, nothing else), lists as JSON arrays of names. For example, from the shell:",
        f"echo {SUBMIT_SENTINEL}; echo '{{{keys}}}'",
    ]
    return "\n".join(lines)


class LiveWebTask(Task):
    """One episode of a LIVEWEB task over the simulated world (see the module docstring).

    :class:`~termgym.tasks.liveweb.LiveWebSuite` draws each episode's world variant, start time and
    questions and passes them here (``start_at``). Without ``start_at``, ``start`` picks the moment:
    ``"random"`` (anywhere in the world's simulated history) or ``"fixed"`` (derived from the task
    id). ``speed`` is simulated seconds per real second (0 freezes time); ``step_seconds`` is added
    per agent command; ``grace_seconds`` is how far back before submission an answer may have been
    true and still count; ``api`` is the sites' JSON API mode (``"paged"`` or ``"bulk"``).
    """

    def __init__(self, task_id: str, *, seed: int, family: str, questions: list[Question], world: World,
                 start: str = "random", speed: float = 1.0, step_seconds: float = 0.0,
                 grace_seconds: float = 300.0, workdir: str = "/workspace",
                 validator: LLMValidator | None = None, server: WorldServer | None = None,
                 live: bool = False, start_at: float | None = None, api: str = "paged") -> None:
        hosts = sorted({SITES[collection_spec(s).site].host for q in questions for s in sources(q.spec)})
        shown = [SITES[collection_spec(s).site].live_host for s in sorted(
            {s for q in questions for s in sources(q.spec)})] if live else [site.host for site in SITES.values()]
        super().__init__(task_id, render_instruction(questions, shown, live=live, api=api), {
            "seed": seed, "family": family, "templates": [q.template for q in questions], "hosts": hosts,
            "world_variant": getattr(world, "variant", None), "api": api,
        })
        if start not in ("random", "fixed"):
            raise ValueError(f"LIVEWEB start must be 'random' or 'fixed', got {start!r}")
        if api not in API_MODES:
            raise ValueError(f"LIVEWEB api must be one of {', '.join(API_MODES)}, got {api!r}")
        self.start_at, self.api = start_at, api
        self.seed, self.family, self.questions, self.world = seed, family, questions, world
        self.start, self.speed, self.step_seconds, self.grace_seconds = start, speed, step_seconds, grace_seconds
        self.workdir = workdir
        self.validator = validator
        self._server = server
        self.episode: Episode | None = None

    # -- the episode --------------------------------------------------------------------------------

    def start_time(self) -> float:
        """Simulated time at which this episode starts (``start_at``, else drawn per ``start``)."""
        if self.start_at is not None:
            return self.start_at
        if self.start == "fixed":
            return self.world.base_time + (stable_hash("start", self.task_id) % (HISTORY // TICK)) * TICK
        return self.world.base_time + secrets.randbelow(HISTORY // TICK) * TICK

    def open_episode(self) -> Episode:
        """Register this task's episode on the world server (idempotent until :meth:`teardown`)."""
        if self.episode is None:
            server = self._server or shared_server()
            self._server = server
            self.episode = server.open_episode(self.world, SimClock(self.start_time(), speed=self.speed), api=self.api)
        return self.episode

    @property
    def clock(self) -> SimClock:
        return self.open_episode().clock

    def services(self) -> list[ServicePort]:
        port = self.open_episode().port
        assert port is not None
        return [ServicePort(site.host, 80, "127.0.0.1", port) for site in SITES.values()]

    def sandbox_spec(self) -> SandboxSpec:
        return SandboxSpec(
            workdir=self.workdir,
            files={f"{BROWSE_DIR}/browse": browse_script()},
            setup_commands=[f"chmod 755 {BROWSE_DIR}/browse"],
            env={"PATH": SANDBOX_PATH},
            services=self.services(),
        )

    def setup(self, sandbox: Any) -> None:
        # Simulated time starts running when the agent gets control, not when the task was loaded.
        self.clock.restart()

    def check_command(self, command: str) -> str | None:
        if self.step_seconds and self.episode is not None:
            self.episode.clock.advance(self.step_seconds)
        return None

    def check_submission(self, submission: str) -> str | None:
        """Refuse a submission that is not a JSON object with every ``answerN`` key, saying why."""
        answers, problem = parse_submission(submission)
        if problem is not None:
            return problem
        missing = [f"answer{i}" for i in range(1, len(self.questions) + 1) if f"answer{i}" not in answers]
        if missing:
            return f"the submission lacks {', '.join(missing)}; give one key per question"
        return None

    def teardown(self) -> None:
        if self.episode is not None and self._server is not None:
            self._server.close_episode(self.episode)
        self.episode = None

    # -- grading ------------------------------------------------------------------------------------

    def grade(self, ctx: GradingContext) -> Grade:
        return self.grade_submission(ctx.submission)

    def grade_submission(self, submission: str | None, at: float | None = None) -> Grade:
        """Grade ``submission`` against the world at simulated time ``at`` (default: now)."""
        t = self.clock.now() if at is None else float(at)
        first_tick = int(t // TICK) * TICK
        times = [t] + [first_tick - i * TICK for i in range(1, int(self.grace_seconds // TICK) + 1)]
        result = grade_answers(self.questions, submission, lambda tt, src: self.world.collection(src, tt), times,
                               self.validator)
        details = {
            "success": result["success"], "per_question": [q["score"] for q in result["questions"]],
            "questions": result["questions"], "feedback": result["feedback"], "sim_time": int(t),
        }
        return Grade(score=result["score"], passed=result["score"] >= SUCCESS_THRESHOLD, details=details)

    def expected_answers(self, at: float | None = None) -> dict[str, Any]:
        """The right answers at simulated time ``at`` (default: now), as a submission would hold them."""
        from termgym.tasks.liveweb.answers import compute

        t = self.clock.now() if at is None else float(at)
        out = {}
        for q in self.questions:
            meta = _meta(sources(q.spec))
            out[q.qid] = compute(q.spec, {s: self.world.collection(s, t) for s in meta}, meta)
        return out

    # -- the oracle ---------------------------------------------------------------------------------

    def oracle_commands(self) -> list[str]:
        """One shell command that fetches what the questions need from the sites' JSON APIs and prints
        the answers as JSON."""
        return [oracle_command(self.questions, self.api)]

    def oracle_submission(self, sandbox: Any) -> str:
        """Run the oracle command in ``sandbox`` (through its network) and return what it printed."""
        result = sandbox.exec(oracle_command(self.questions, self.api), timeout=120)
        if result.exit_code != 0:
            raise RuntimeError(f"the LIVEWEB oracle failed in the sandbox of {self.task_id}: {result.output[-2000:]}")
        return result.output.strip()


def _meta(srcs: list[str]) -> dict[str, dict[str, str]]:
    out = {}
    for src in srcs:
        spec = collection_spec(src)
        out[src] = {"key_field": spec.key_field, "name_field": spec.name_field, "host": SITES[spec.site].host,
                    "api_path": spec.api_path}
    return out


_ORACLE_MAIN = r'''
import json as _json
import urllib.parse as _parse
import urllib.request as _request

_opener = _request.build_opener(_request.ProxyHandler({}))


def _get(host, path):
    with _opener.open("http://" + host + path, timeout=60) as _resp:
        return _json.loads(_resp.read())


_data, _at = {}, None
for _src, _m in META.items():
    _need = NEEDS[_src]
    if not PAGED:  # one request holds the whole collection
        _data[_src] = _get(_m["host"], _m["api_path"])["items"]
        continue
    if _at is None:  # pin one snapshot time for every request (the sites share the clock)
        _at = _get(_m["host"], "/api")["time"]
    if _need is None:  # the whole collection: page through it
        _items, _url = [], _m["api_path"] + "?page=1&at=" + str(_at)
        while _url:
            _page = _get(_m["host"], _url)
            _items += _page["items"]
            _url = _page["next"]
        _data[_src] = _items
    else:  # only the records the questions name
        _data[_src] = [_get(_m["host"], _m["api_path"] + "/" + _parse.quote(str(_k), safe="") + "?at=" + str(_at))["item"]
                       for _k in _need]
_answers = {q["qid"]: compute(q["spec"], _data, META) for q in QUESTIONS}
print(_json.dumps(_answers))
'''

#: Question kinds that read a whole collection (rankings, counts); the others name their records.
_WHOLE_COLLECTION = ("nth", "top", "count", "share_pct")


def records_needed(questions: list[Question]) -> dict[str, list | None]:
    """Per ``"site/collection"``, the keys the questions name, or ``None`` when they need all records."""
    need: dict[str, set | None] = {}
    for q in questions:
        spec = q.spec
        if spec["kind"] in _WHOLE_COLLECTION:
            need[spec["src"]] = None
            continue
        refs = ([{"src": spec["src"], "key": k} for k in spec.get("keys", [])] if "src" in spec else
                spec.get("refs") or [spec["a"], spec["b"]])
        if "src" in spec and "key" in spec:
            refs = [{"src": spec["src"], "key": spec["key"]}]
        for ref in refs:
            if ref["src"] in need and need[ref["src"]] is None:
                continue
            need.setdefault(ref["src"], set()).add(ref["key"])
    return {src: None if keys is None else sorted(keys, key=str) for src, keys in need.items()}


def oracle_command(questions: list[Question], api: str = "paged") -> str:
    """A shell command running :mod:`answers` plus a fetch loop in the sandbox's python3.

    With the paged API it pins one snapshot time, pages through the collections that rankings and
    counts need and fetches the named records one by one; with the bulk API it reads each
    collection in one request.
    """
    srcs = sorted({s for q in questions for s in sources(q.spec)})
    payload = json.dumps([{"qid": q.qid, "spec": q.spec} for q in questions])
    program = ((_HERE / "answers.py").read_text()
               + f"\nQUESTIONS = __import__('json').loads({payload!r})\n"
               + f"META = __import__('json').loads({json.dumps(_meta(srcs))!r})\n"
               + f"NEEDS = __import__('json').loads({json.dumps(records_needed(questions))!r})\n"
               + f"PAGED = {api == 'paged'!r}\n" + _ORACLE_MAIN)
    # -S: no site-packages needed (stdlib only), and a faster start.
    return f"python3 -S - <<'TERMGYM_ORACLE_EOF'\n{program}\nTERMGYM_ORACLE_EOF"
