"""LIVEWEB grading cannot be talked round: hedged names, candidate lists and loose numbers score 0.

For questions of real tasks (all families, test split) the right answer is computed, then dressed
up the way a hedging agent would: negations (``"not Vypyr"``), several candidates (``"A or B"``,
``"A, B"``), the right name inside a sentence, every candidate of a set question. Numbers are
pushed just past the tolerance the site's display precision allows. Each must score 0; the right
answer itself scores 1. An LLM judge that says YES to everything (a real OpenAI-style HTTP server
on loopback) must not rescue a hedged answer either.
"""

from __future__ import annotations

import json
import math
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from termgym.tasks.liveweb import LiveWebSuite
from termgym.tasks.liveweb.answers import compute, sources
from termgym.tasks.liveweb.grading import LLMValidator, display_tolerance, score_answer
from termgym.tasks.liveweb.sites import collection_spec
from termgym.tasks.liveweb.task import _meta


@pytest.fixture(scope="module")
def episodes():
    """(task, data at its start, meta) for 90 held-out tasks of every family."""
    suite = LiveWebSuite(speed=0, start="fixed")  # reproducible episodes
    ids = random.Random(21).sample(list(suite.task_ids("test")), 90)
    out = []
    for tid in ids:
        task = suite.load(tid)
        t = task.start_time()
        srcs = sorted({s for q in task.questions for s in sources(q.spec)})
        out.append((task, {s: task.world.collection(s, t) for s in srcs}, _meta(srcs)))
    return out


def _candidates(q, data) -> list[str]:
    """Names a hedging agent could mix in: the other subjects of the question, else other records."""
    spec = q.spec
    if spec["kind"] in ("pick_refs", "pick_change"):
        refs = spec.get("refs") or [item["now"] for item in spec["items"]]
        return [next(r for r in data[ref["src"]] if str(r[collection_spec(ref["src"]).key_field]) == str(ref["key"]))
                [collection_spec(ref["src"]).name_field] for ref in refs]
    cs = collection_spec(spec["src"])
    records = data[spec["src"]]
    if "keys" in spec:
        records = [r for r in records if r[cs.key_field] in spec["keys"]]
    return [r[cs.name_field] for r in records[:8]]


def _hedges(right: str, wrong: str) -> list[str]:
    return [f"not {wrong}", f"{right} or {wrong}", f"{wrong} or {right}", f"{right}, {wrong}", f"{right}/{wrong}",
            f"{right} {wrong}", f"either {right} or {wrong}", f"{right} (not {wrong})", f"{right}; {wrong}",
            f"It isn't {wrong}", f"{right} — definitely not {wrong}"]


class YesJudge(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that approves every answer."""

    def do_POST(self):  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "YES"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def yes_judge():
    server = ThreadingHTTPServer(("127.0.0.1", 0), YesJudge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield LLMValidator(f"http://127.0.0.1:{server.server_address[1]}/v1", "yes-model")
    server.shutdown()


def test_hedged_names_score_zero(episodes, yes_judge):
    tried = 0
    for task, data, meta in episodes:
        for q in task.questions:
            if q.answer_type != "name":
                continue
            right = compute(q.spec, data, meta)
            assert score_answer(q, right, data, meta).score == 1.0
            for wrong in [c for c in _candidates(q, data) if c != right][:2]:
                for hedge in _hedges(right, wrong):
                    for judge in (None, yes_judge):
                        scored = score_answer(q, hedge, data, meta, judge)
                        assert scored.score == 0.0, (task.task_id, q.text, hedge, scored.message)
                        tried += 1
    assert tried > 200


def test_the_judge_still_helps_an_honest_free_text_answer(episodes, yes_judge):
    task, data, meta = next((t, d, m) for t, d, m in episodes if any(q.answer_type == "name" for q in t.questions))
    q = next(q for q in task.questions if q.answer_type == "name")
    right = compute(q.spec, data, meta)
    assert score_answer(q, right + "!!", data, meta).score == 1.0  # punctuation is normalised away
    assert score_answer(q, f"The answer is {right}.", data, meta).score == 0.0  # not a name: exact rule
    assert score_answer(q, f"{right} coin", data, meta).score == 0.0
    assert score_answer(q, f"{right} coin", data, meta, yes_judge).score == 1.0  # one name, no hedge: judged


def test_listing_every_candidate_of_a_set_or_ranking_scores_zero(episodes):
    tried = 0
    for task, data, meta in episodes:
        for q in task.questions:
            if q.answer_type not in ("names_set", "names_list"):
                continue
            right = compute(q.spec, data, meta)
            assert score_answer(q, right, data, meta).score == 1.0
            everyone = _candidates(q, data)
            padded = [*right, *[c for c in everyone if c not in right][:1]]
            for attack in (everyone, padded, [*right, *right], "; ".join(everyone), [f"not {right[0]}"]):
                if sorted(attack if isinstance(attack, list) else attack.split("; ")) == sorted(right):
                    continue  # the candidates happen to be exactly the answer
                assert score_answer(q, attack, data, meta).score == 0.0, (task.task_id, q.text, attack)
                tried += 1
    assert tried > 20


def test_tolerances_come_from_display_precision_and_are_tight(episodes, capsys):
    """A number a hair outside the display tolerance scores 0; the relative tolerance stays tiny."""
    ratios = []
    for task, data, meta in episodes:
        for q in task.questions:
            if q.answer_type not in ("number", "integer"):
                continue
            right = compute(q.spec, data, meta)
            tol = 0.0 if q.answer_type == "integer" else display_tolerance(q.spec, data, meta, right)
            assert score_answer(q, right, data, meta).score == 1.0
            if q.answer_type == "integer":
                off = [right + 1, right - 1, right + 0.5]
            else:
                off = [right + 1.5 * tol + 1e-11 * max(1.0, abs(right)), right - 1.5 * tol - 1e-11 * max(1.0, abs(right))]
                # the loose tolerances of old (1 %, up to 39 % for deltas) no longer pass, except for a
                # lookup whose last displayed digit is itself that coarse (a 24 h change of 0.4 %)
                off += [right * f for f in (1.01, 0.99, 1.3) if tol < abs(right) * abs(f - 1)]
                assert score_answer(q, right + 0.9 * tol, data, meta).score == 1.0, (task.task_id, q.text)
                if q.spec["kind"] in ("value", "hop") or q.spec.get("op") in ("max", "min"):
                    # a value as shown (a lookup, a day's high): to the last digit the site shows
                    name = q.spec.get("then") or q.spec.get("field") or q.spec["refs"][0]["field"]
                    src = q.spec.get("src") or q.spec["refs"][0]["src"]
                    assert tol == collection_spec(src).fields[name].half_unit(right)
                elif right:
                    ratios.append(tol / abs(right))
            for value in off:
                scored = score_answer(q, value, data, meta)
                assert scored.score == 0.0, (task.task_id, q.template, right, value, scored.message)
    ratios.sort()
    p90, worst = ratios[int(0.9 * len(ratios))], ratios[-1]
    with capsys.disabled():
        print(f"\nLIVEWEB tolerance / |answer| over {len(ratios)} computed answers: p90 {p90:.2e}, max {worst:.2e}")
    assert worst <= 5e-4  # rounding to 4 significant digits, nothing looser


def test_integer_fields_must_match_exactly(episodes):
    for task, data, meta in episodes:
        for q in task.questions:
            spec = q.spec
            if spec["kind"] == "value" and collection_spec(spec["src"]).fields[spec["field"]].exact:
                assert q.answer_type == "integer"
                right = compute(spec, data, meta)
                assert score_answer(q, right, data, meta).score == 1.0
                assert score_answer(q, right + 1, data, meta).score == 0.0
                assert math.isclose(display_tolerance(spec, data, meta, right), 0.0)
