"""The LIVEWEB task suite: ids ``liveweb-<family>-<seed>``, splits, and a fresh episode per load."""


from __future__ import annotations

import random
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from termgym.tasks.base import TaskSuite
from termgym.tasks.liveweb.grading import LLMValidator
from termgym.tasks.liveweb.noise import HISTORY, TICK, stable_hash
from termgym.tasks.liveweb.questions import FAMILIES, make_questions
from termgym.tasks.liveweb.server import WorldServer
from termgym.tasks.liveweb.sites.base import API_MODES, DEFAULT_API
from termgym.tasks.liveweb.task import LiveWebTask, difficulty, oracle_requests
from termgym.tasks.liveweb.world import SimClock, World

_TASK_ID = re.compile(r"^liveweb-([a-z]+)-(\d+)$")
SOURCES = ("offline", "live")


class LiveWebSuite(TaskSuite):
    """The LIVEWEB task suite.

    Options: ``seeds`` (tasks per family, default 5000), ``families`` (default all six; in live
    mode the three with a live source),
    ``test_every`` (seeds divisible by it form the held-out ``test`` split, default 20), ``source``
    (``"offline"``: the simulated world; ``"live"``: the real sites), ``start``, ``speed``,
    ``step_seconds``, ``grace_seconds`` (see :class:`LiveWebTask`), ``workdir``, ``questions``
    (a fixed number of sub-questions 2–4 instead of a random one), ``validator`` (an
    :class:`LLMValidator`, a dict of its arguments, or ``"env"`` to read ``LIVEWEB_VALIDATOR_*``),
    ``api`` (the sites' JSON API: ``"limited"``, the default — summary fields only, a page at a
    time, a request quota; ``"off"``; ``"paged"``: every field a page at a time; ``"bulk"``: a whole
    collection per request). The HTML pages have everything whatever the mode.

    ``start`` says where each episode's draw comes from: ``"random"`` (default) from the operating
    system's entropy; ``"fixed"`` from ``(task id, n)`` where ``n`` counts this suite's loads of
    that task, so a fresh suite replays the same sequence of episodes (reproducible runs) while no
    two episodes of one run share a world. :meth:`load_episode` loads one episode by number.
    """

    name = "liveweb"

    def __init__(self, *, seeds: int = 5000, families: Sequence[str] | None = None, test_every: int = 20,
                 source: str = "offline", start: str = "random", speed: float = 1.0, step_seconds: float = 0.0,
                 grace_seconds: float = 300.0, workdir: str = "/workspace", questions: int | None = None,
                 validator: LLMValidator | dict | str | None = None, server: WorldServer | None = None,
                 api: str = DEFAULT_API) -> None:
        if source not in SOURCES:
            raise ValueError(f"LiveWebSuite source must be one of {', '.join(SOURCES)}, got {source!r}")
        if families is None:
            from termgym.tasks.liveweb.live import LIVE_FAMILIES

            families = LIVE_FAMILIES if source == "live" else FAMILIES
        unknown = [f for f in families if f not in FAMILIES]
        if unknown:
            raise ValueError(f"unknown LIVEWEB families {unknown}; choose from {', '.join(FAMILIES)}")
        if seeds < 1 or test_every < 2:
            raise ValueError("LiveWebSuite needs seeds >= 1 and test_every >= 2")
        if questions is not None and not 2 <= questions <= 4:
            raise ValueError(f"questions must be 2, 3 or 4, got {questions!r}")
        if start not in ("random", "fixed"):
            raise ValueError(f"LIVEWEB start must be 'random' or 'fixed', got {start!r}")
        if api not in API_MODES:
            raise ValueError(f"LIVEWEB api must be one of {', '.join(API_MODES)}, got {api!r}")
        SimClock(0, speed=speed)  # validates speed
        self.seeds, self.families, self.test_every, self.source = seeds, tuple(families), test_every, source
        self.start = start
        self.options = {"speed": speed, "step_seconds": step_seconds, "grace_seconds": grace_seconds,
                        "workdir": workdir, "api": api}
        self._loads: dict[str, int] = {}
        self.n_questions = questions
        self.validator = _validator(validator)
        self._server = server
        self._worlds: OrderedDict[int, World] = OrderedDict()
        self._lock = threading.Lock()

    def splits(self) -> Sequence[str]:
        return ("train", "test")

    def task_ids(self, split: str | None = None) -> Sequence[str]:
        split = split or "train"
        if split not in ("train", "test", "all"):
            raise KeyError(f"suite 'liveweb' has no split {split!r}; splits: train, test, all")
        out = []
        for seed in range(self.seeds):
            held_out = seed % self.test_every == 0
            if split == "all" or held_out == (split == "test"):
                out += [f"liveweb-{family}-{seed:05d}" for family in self.families]
        return out

    def world(self, seed: int, variant: int = 0) -> World:
        """The (cached) world of ``seed`` and ``variant`` (0: the seed's canonical world)."""
        key = (seed, variant)
        with self._lock:
            world = self._worlds.get(key)
            if world is not None:
                self._worlds.move_to_end(key)
                return world
        world = World(seed, variant=variant)
        with self._lock:
            world = self._worlds.setdefault(key, world)
            while len(self._worlds) > 32:
                self._worlds.popitem(last=False)
        return world

    def _parse(self, task_id: str) -> tuple[str, int]:
        m = _TASK_ID.match(str(task_id))
        if not m or m.group(1) not in self.families or int(m.group(2)) >= self.seeds:
            raise KeyError(f"suite 'liveweb' has no task {task_id!r}; ids look like 'liveweb-crypto-00042' "
                           f"(families {', '.join(self.families)}, seeds 0..{self.seeds - 1})")
        return m.group(1), int(m.group(2))

    def load(self, task_id: str) -> LiveWebTask:
        """A fresh episode of ``task_id`` (see the class docstring for what ``start`` makes of it)."""
        family, seed = self._parse(task_id)
        if self.source == "live":
            from termgym.tasks.liveweb.live import load_live_task

            rng = random.Random(f"liveweb:{task_id}")
            return load_live_task(task_id, seed=seed, family=family, rng=rng, n_questions=self.n_questions,
                                  validator=self.validator, workdir=self.options["workdir"])
        if self.start == "fixed":
            with self._lock:
                n = self._loads.get(task_id, 0)
                self._loads[task_id] = n + 1
            return self.load_episode(task_id, n)
        return self._load(task_id, family, seed, secrets.randbits(62) | 1)

    def load_episode(self, task_id: str, episode: int) -> LiveWebTask:
        """Episode number ``episode`` of ``task_id``: the same world, time and questions on every machine."""
        family, seed = self._parse(task_id)
        if self.source == "live":
            raise ValueError("live tasks have no numbered episodes: the real sites only show the present")
        return self._load(task_id, family, seed, stable_hash("episode", task_id, int(episode)) | 1)

    def _load(self, task_id: str, family: str, seed: int, draw: int) -> LiveWebTask:
        # One draw decides the episode: the world variant, the start time and the questions' RNG.
        # Questions are drawn from the state at the start, so subjects and thresholds are new too.
        world = World(seed, variant=draw) if self.start == "random" else self.world(seed, draw)
        start = world.base_time + stable_hash("start", draw) % (HISTORY // TICK) * TICK
        rng = random.Random(f"liveweb:{task_id}:{draw}")
        questions = make_questions(family, rng, lambda src: world.collection(src, start), start, self.n_questions)
        task = LiveWebTask(task_id, seed=seed, family=family, questions=questions, world=world,
                           validator=self.validator, server=self._server, start=self.start, start_at=start,
                           **self.options)
        requests = oracle_requests(questions, world, start)
        task.metadata.update(oracle_requests=requests, difficulty=difficulty(requests))
        return task


def _validator(value: LLMValidator | dict | str | None) -> LLMValidator | None:
    if value is None or isinstance(value, LLMValidator):
        return value
    if value == "env":
        found = LLMValidator.from_env()
        if found is None:
            raise ValueError("validator='env' needs LIVEWEB_VALIDATOR_BASE_URL and LIVEWEB_VALIDATOR_MODEL set")
        return found
    if isinstance(value, dict):
        return LLMValidator(**value)
    raise TypeError(f"validator must be an LLMValidator, a dict of its arguments or 'env', not {value!r}")


def default_suite(**options: Any) -> LiveWebSuite:
    """The suite behind ``termgym/LiveWeb-v0`` (options as :class:`LiveWebSuite` takes them)."""
    return LiveWebSuite(**options)
