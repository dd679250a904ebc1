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
from termgym.tasks.liveweb.answers import refs_of, sources
from termgym.tasks.liveweb.grading import SUCCESS_THRESHOLD, LLMValidator, grade_answers, parse_submission
from termgym.tasks.liveweb.noise import HISTORY, TICK, stable_hash
from termgym.tasks.liveweb.questions import Question
from termgym.tasks.liveweb.server import Episode, WorldServer, shared_server
from termgym.tasks.liveweb.sites import SITES, collection_spec
from termgym.tasks.liveweb.sites.base import API_MODES, DEFAULT_API, MAX_PER_PAGE
from termgym.tasks.liveweb.world import SimClock, World

#: Where the page reader is installed inside the sandbox (and put on PATH).
BROWSE_DIR = "/opt/liveweb/bin"
SANDBOX_PATH = f"{BROWSE_DIR}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SUBMIT_SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_HERE = Path(__file__).resolve().parent


def browse_script() -> str:
    """Source of the ``browse`` page reader installed into every LIVEWEB sandbox."""
    return (_HERE / "browse.py").read_text()


def render_instruction(questions: list[Question], hosts: list[str], *, live: bool = False,
                       api: str = DEFAULT_API) -> str:
    """The task text: where the sites are, the questions, and the answer format."""
    where = ("These real websites are reachable from your terminal" if live else
             "These simulated websites are reachable over HTTP from your terminal (there is no other network)")
    keys = ", ".join(f'"{q.qid}": ...' for q in questions)
    lines = [
        "Answer the questions below by looking up current data on the web.",
        "",
        f"{where}: " + ", ".join(f"http://{h}" for h in hosts) + ".",
        ("Use their public JSON APIs (or pages) as you see fit." if live else
         "They are ordinary websites: list pages can be sorted (the column headings and sort links) and filtered, "
         "there is a search, every item has its own page, and history pages show past values (a day's hourly "
         "prices, past front pages). List pages round their numbers; the exact value of every figure is in its "
         "element's data-value attribute (see the HTML with `browse --raw URL`)."
         + (" The sites also have a JSON API under /api (start with /api"
            + ("; collections are served a page at a time, and /api/<collection>/<key> gives one record)."
               if api == "paged" else ").") if api in ("paged", "bulk") else "")),
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
    true and still count; ``api`` is the sites' JSON API mode (``"limited"``, the default, ``"off"``,
    ``"paged"`` or ``"bulk"``; the oracle browses the HTML pages whatever the mode).
    """

    def __init__(self, task_id: str, *, seed: int, family: str, questions: list[Question], world: World,
                 start: str = "random", speed: float = 1.0, step_seconds: float = 0.0,
                 grace_seconds: float = 300.0, workdir: str = "/workspace",
                 validator: LLMValidator | None = None, server: WorldServer | None = None,
                 live: bool = False, start_at: float | None = None, api: str = DEFAULT_API) -> None:
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

    def oracle_plan(self) -> list[dict[str, Any]]:
        """Per question, the pages an efficient browser fetches (see :func:`plan_question`)."""
        t = self.start_time() if self.episode is None else self.episode.clock.now()
        return [plan_question(q, self.world, t) for q in self.questions]

    def oracle_commands(self) -> list[str]:
        """One shell command that browses the sites' HTML pages for what the questions need and prints
        the answers as JSON."""
        return [oracle_command(self.questions, self.oracle_plan())]

    def oracle_submission(self, sandbox: Any) -> str:
        """Run the oracle command in ``sandbox`` (through its network) and return what it printed."""
        result = sandbox.exec(oracle_command(self.questions, self.oracle_plan()), timeout=120)
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


#: Question kinds answered from a list page (a ranking or a count) rather than from named records.
_WHOLE_COLLECTION = ("nth", "top", "count", "share_pct", "hop")


def _named(spec: dict) -> list[tuple[str, Any, str]]:
    """``(src, key, field)`` of every named value a spec reads."""
    kind = spec["kind"]
    if kind == "value":
        return [(spec["src"], spec["key"], spec["field"])]
    if kind == "abs_change":
        return [(spec["src"], spec["key"], spec["price_field"]), (spec["src"], spec["key"], spec["prev_field"])]
    if kind in ("delta", "pick", "members"):
        fields = [spec["field"]] if "field" in spec else [c["field"] for c in spec["where"]]
        return [(spec["src"], k, f) for k in spec["keys"] for f in fields]
    return [(r["src"], r["key"], r["field"]) for r in refs_of(spec)]


def plan_question(q: Question, world: World, t: float) -> dict[str, Any]:
    """The pages an efficient browser fetches for ``q``: ``{"fetch": [[host, path, follow_next, src], ...],
    "hop": None | {"host", "path"}}``.

    Rankings and counts read one list page, filtered and sorted by the site (all its pages for a
    count); past values come from the record's history page; named present values from the
    records' pages, or from one list page when that is fewer requests; a ``hop`` reads the ranking
    and then the chosen record's page (``{key}`` in the path is filled in by the oracle).
    """
    spec = q.spec
    fetch: list[list[Any]] = []
    hop = None
    if spec["kind"] in _WHOLE_COLLECTION:
        cs = collection_spec(spec["src"])
        site = SITES[cs.site]
        at = spec["src"].partition("@")[2]
        if at:
            path = site.history_path(cs.name, None, int(at))
        else:
            sort = spec.get("field") if spec["kind"] != "count" and spec["kind"] != "share_pct" else None
            path = site.list_path(cs.name, spec.get("scope", []), sort, spec.get("order", "desc"))
        fetch.append([site.host, path, spec["kind"] in ("count", "share_pct"), spec["src"]])
        if spec["kind"] == "hop" and not cs.fields[spec["then"]].listed:
            hop = {"host": site.host, "path": site.detail_path(cs.name, "{key}")}
        return {"fetch": fetch, "hop": hop}
    by_src: dict[str, tuple[set, set]] = {}
    for src, key, field in _named(spec):
        keys, fields = by_src.setdefault(src, (set(), set()))
        keys.add(key)
        fields.add(field)
    for src, (keys, fields) in sorted(by_src.items()):
        cs = collection_spec(src)
        site = SITES[cs.site]
        at = src.partition("@")[2]
        paths: list[tuple[str, bool]]  # (path, follow "next" links)
        if at:
            paths = [(site.history_path(cs.name, k, int(at)), False) for k in sorted(keys, key=str)]
        elif src == "subnets/network":
            paths = [("/", False)]
        else:
            list_pages = -(-len(world.collection(src, t)) // MAX_PER_PAGE)
            if all(cs.fields[f].listed for f in fields if f in cs.fields) and list_pages < len(keys):
                paths = [(site.list_path(cs.name, []), True)]
            else:
                paths = [(site.detail_path(cs.name, k), False) for k in sorted(keys, key=str)]
        for path, follow in paths:
            if [site.host, path, follow, src] not in fetch:
                fetch.append([site.host, path, follow, src])
    return {"fetch": fetch, "hop": hop}


#: Difficulty tiers by the requests the oracle needs: (upper bound, name).
TIERS = ((3, "easy"), (6, "medium"), (10**9, "hard"))


def oracle_requests(questions: list[Question], world: World, t: float) -> int:
    """How many pages the oracle fetches for ``questions`` at time ``t`` (each distinct page once)."""
    from termgym.tasks.liveweb.answers import _ordered, _where

    seen: set[tuple[str, str]] = set()
    n = 0
    for q in questions:
        plan = plan_question(q, world, t)
        pages = [(host, path, follow, src) for host, path, follow, src in plan["fetch"]]
        if plan["hop"]:
            spec = q.spec
            cs = collection_spec(spec["src"])
            ranked = _ordered(_where(_where(world.collection(spec["src"], t), spec.get("scope", [])),
                                     spec.get("filter", [])), spec["field"], spec["order"], cs.key_field)
            key = str(ranked[spec["k"] - 1][cs.key_field])
            pages.append((plan["hop"]["host"], plan["hop"]["path"].replace("{key}", key), False, spec["src"]))
        for host, path, follow, src in pages:
            if (host, path) in seen:
                continue
            seen.add((host, path))
            n += 1
            if follow:  # a whole list: the records the scope admits, MAX_PER_PAGE a page
                scope = q.spec.get("scope", []) if q.spec["kind"] in _WHOLE_COLLECTION else []
                n += max(0, -(-len(_where(world.collection(src, t), scope)) // MAX_PER_PAGE) - 1)
    return n


def difficulty(requests: int) -> str:
    """The tier of a task whose oracle needs ``requests`` pages."""
    return next(name for bound, name in TIERS if requests <= bound)


_ORACLE_MAIN = r'''
import json as _json
import urllib.parse as _parse
import urllib.request as _request
from html.parser import HTMLParser as _HTMLParser

_opener = _request.build_opener(_request.ProxyHandler({}))
_pages = {}


class _Reader(_HTMLParser):
    """Records of a page: elements with data-src/data-key, values in data-field/data-value."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.records, self.next, self._cur = [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-src" in a and "data-key" in a:
            self._cur = {"src": a["data-src"], "key": a["data-key"], "fields": {}}
            self.records.append(self._cur)
        if "data-field" in a and self._cur is not None:
            v = a.get("data-value", "")
            if a.get("data-type") != "text":
                try:
                    v = int(v)
                except ValueError:
                    try:
                        v = float(v)
                    except ValueError:
                        pass
            self._cur["fields"][a["data-field"]] = v
        if tag == "a" and a.get("rel") == "next":
            self.next = a.get("href")


def _read(host, path):
    if (host, path) not in _pages:
        with _opener.open("http://" + host + path, timeout=60) as _resp:
            _reader = _Reader()
            _reader.feed(_resp.read().decode("utf-8"))
        _pages[(host, path)] = _reader
    return _pages[(host, path)]


def _collect(steps, data):
    for _host, _path, _follow, _src in steps:
        while _path:
            _page = _read(_host, _path)
            for _rec in _page.records:
                if _rec["src"] not in META:
                    continue
                _kf = META[_rec["src"]]["key_field"]
                data.setdefault(_rec["src"], {}).setdefault(_rec["key"], {_kf: _rec["key"]}).update(_rec["fields"])
            _path = _page.next if _follow else None


_answers = {}
for _q in QUESTIONS:
    _spec, _data = _q["spec"], {}
    _collect(_q["plan"]["fetch"], _data)
    _hop = _q["plan"]["hop"]
    if _hop:
        _kf = META[_spec["src"]]["key_field"]
        _recs = _where(_where(list(_data.get(_spec["src"], {}).values()), _spec.get("scope", [])), _spec.get("filter", []))
        _chosen = _ordered(_recs, _spec["field"], _spec["order"], _kf)[_spec["k"] - 1]
        _path = _hop["path"].replace("{key}", _parse.quote(str(_chosen[_kf]), safe=""))
        _collect([[_hop["host"], _path, False, _spec["src"]]], _data)
    _answers[_q["qid"]] = compute(_spec, {s: list(_data.get(s, {}).values()) for s in sources(_spec)}, META)
print(_json.dumps(_answers))
'''


def oracle_command(questions: list[Question], plans: list[dict[str, Any]]) -> str:
    """A shell command running :mod:`answers` plus a small HTML reader in the sandbox's python3.

    It fetches the pages of each question's plan (:func:`plan_question`; a page once per run),
    reads the records marked up in them and computes the answers with the grader's own code.
    """
    srcs = sorted({s for q in questions for s in sources(q.spec)})
    payload = json.dumps([{"qid": q.qid, "spec": q.spec, "plan": plan} for q, plan in zip(questions, plans, strict=True)])
    program = ((_HERE / "answers.py").read_text()
               + f"\nQUESTIONS = __import__('json').loads({payload!r})\n"
               + f"META = __import__('json').loads({json.dumps(_meta(srcs))!r})\n" + _ORACLE_MAIN)
    # -S: no site-packages needed (stdlib only), and a faster start.
    return f"python3 -S - <<'TERMGYM_ORACLE_EOF'\n{program}\nTERMGYM_ORACLE_EOF"
