"""The answer a careful person computes from what the pages show scores 1, for every answer type.

One episode through the real env (bubblewrap sandbox, the world server on loopback, forwarded
ports) asks eight questions; each is answered the way a person with a terminal would: ``browse`` the
page, read the numbers *as the text shows them* (not the exact ``data-value`` attributes), compute.
Was: the stocks' "change since the previous close" expected price − price/(1 + rounded percent),
so last − previous close as displayed scored 0 on 127 of 136 such questions; crypto's absolute
change did not say from what.
"""

from __future__ import annotations

import datetime
import json
import random
import re

import pytest

from termgym.env import TerminalEnv
from termgym.tasks.liveweb import LiveWebSuite
from termgym.tasks.liveweb.questions import TEMPLATES, Ctx, Skip
from termgym.tasks.liveweb.sites import collection_spec
from termgym.tasks.liveweb.task import LiveWebTask

pytestmark = pytest.mark.usefixtures("require_bwrap")

#: (template, collection): one question each; together they cover every answer type.
ASKED = [("abs_change", "stocks/quotes"), ("abs_change", "crypto/coins"), ("abs_change", "subnets/subnets"),
         ("change_since", "crypto/coins"), ("sector_up", "stocks/quotes"), ("compare", "crypto/coins"),
         ("threshold", "stocks/quotes"), ("top3", "subnets/subnets")]


class AskedSuite(LiveWebSuite):
    """Episodes of one task id whose questions are the :data:`ASKED` templates, frozen in time."""

    def load(self, task_id: str) -> LiveWebTask:
        base = self.load_episode(task_id, 0)
        t = base.start_time()
        questions = []
        for template, src in ASKED:
            for i in range(200):
                ctx = Ctx(random.Random(f"{template}:{i}"), lambda s: base.world.collection(s, t), t)
                try:
                    q = TEMPLATES[template](ctx, collection_spec(src))
                except Skip:
                    continue
                break
            q.qid = f"answer{len(questions) + 1}"
            questions.append(q)
        return LiveWebTask(task_id, seed=base.seed, family="cross", questions=questions, world=base.world,
                           start_at=t, speed=0, server=self._server)


def number(text: str) -> float:
    return float(text.replace(",", "").replace("$", "").replace("τ", "").replace("%", "").strip())


def line_value(page: str, label: str) -> float:
    """The number after ``label`` on its line (``Last | 137.974``, ``Alpha price 0.0123 τ``)."""
    m = re.search(rf"^{re.escape(label)}(?: \|)? ([-+$\d.,]+)", page, re.MULTILINE)
    assert m, f"{label!r} not on the page:\n{page[:1500]}"
    return number(m.group(1))


def test_natural_computations_score_one_through_the_env():
    env = TerminalEnv(AskedSuite(speed=0, start="fixed"))
    try:
        env.reset(options={"task_id": "liveweb-cross-00007"})
        task, box = env.task, env.sandbox

        def browse(url: str) -> str:
            result = box.exec(f"browse '{url}'", timeout=60)
            assert result.exit_code == 0, result.output
            return result.output

        answers = {}
        for q in task.questions:
            spec = q.spec
            if q.template == "abs_change" and spec["src"] == "stocks/quotes":
                page = browse(f"stooq.test/q/?s={spec['key'].lower()}")
                answers[q.qid] = line_value(page, "Last") - line_value(page, "Prev. close")
            elif q.template == "abs_change" and spec["src"] == "crypto/coins":
                page = browse(f"coingecko.test/coins/{spec['key']}")
                answers[q.qid] = line_value(page, "Price") - line_value(page, "Price 24h ago")
            elif q.template == "abs_change":
                page = browse(f"taostats.test/subnets/{spec['key']}")
                answers[q.qid] = line_value(page, "Alpha price") - line_value(page, "Price 24h ago")
            elif q.template == "change_since":
                now_ref, then_ref = spec["refs"]
                at = int(then_ref["src"].split("@")[1])
                day = datetime.datetime.utcfromtimestamp(at)
                history = browse(f"coingecko.test/coins/{then_ref['key']}/history?date={day:%Y-%m-%d}")
                row = next(line for line in history.splitlines() if line.startswith(f"{day:%Y-%m-%d %H:%M} | "))
                then = number(row.split(" | ")[2])
                now = line_value(browse(f"coingecko.test/coins/{now_ref['key']}"), "Price")
                answers[q.qid] = now - then
            elif q.template == "sector_up":
                sector = spec["scope"][0]["value"]
                page = browse(f"stooq.test/?sector={sector}&per_page=100")
                rows = [line.split(" | ") for line in page.splitlines() if line.count(" | ") == 6
                        and line.split(" | ")[2] == sector]
                op = spec["where"][0]["op"]
                answers[q.qid] = sum((number(r[4]) > 0) if op == ">" else (number(r[4]) < 0) for r in rows)
            elif q.template == "compare":
                values = {}
                for key in spec["keys"]:
                    page = browse(f"coingecko.test/coins/{key}")
                    name = re.search(r"^(.+) \(.+\) price$", page, re.MULTILINE).group(1)
                    label = {"price_usd": "Price", "market_cap_usd": "Market cap", "volume_24h_usd": "24h trading volume",
                             "change_24h_pct": "24h change", "change_7d_pct": "7d change",
                             "circulating_supply": "Circulating supply"}[spec["field"]]
                    values[name] = line_value(page, label)
                pick = max if spec["mode"] == "max" else min
                answers[q.qid] = pick(values, key=values.get)
            elif q.template == "threshold":
                cond = spec["where"][0]
                label = {"price": "Last", "change_pct": "Change %", "volume": "Volume", "market_cap": "Market cap (USD)",
                         "open": "Open", "prev_close": "Prev. close"}[cond["field"]]
                chosen = []
                for key in spec["keys"]:
                    page = browse(f"stooq.test/q/?s={key.lower()}")
                    value = line_value(page, label)
                    if value > cond["value"] if cond["op"] == ">" else value >= cond["value"]:
                        chosen.append(key)
                answers[q.qid] = chosen
            elif q.template == "top3":
                page = browse(f"taostats.test/subnets?sort={spec['field']}&order=desc")
                rows = [line.split(" | ") for line in page.splitlines() if re.match(r"^\d+ \| SN\d+", line)]
                answers[q.qid] = [r[2] for r in rows[:3]]
        _, reward, terminated, _, info = env.step(env.protocol.submit_message(json.dumps(answers)))
        assert terminated, info.get("submission_error")
        per_question = {q["template"] + ":" + q["question"][:60]: (q["score"], q["given"], q["expected"])
                        for q in info["grade"]["questions"]}
        assert info["grade"]["per_question"] == [1.0] * len(ASKED), per_question
    finally:
        env.close()


def test_the_old_formula_for_the_stocks_change_no_longer_stands_in():
    """The sabotage check: price − price/(1 + rounded percent), the v1 expectation, is not accepted
    where it differs from last − previous close by more than the answer's precision."""
    suite = LiveWebSuite(speed=0, start="fixed")
    tried = refused = 0
    for n in range(15):
        task = suite.load_episode("liveweb-stocks-00011", n)
        t = task.start_time()
        for quote in task.world.collection("stocks/quotes", t)[:10]:
            q = TEMPLATES["abs_change"](Ctx(random.Random(0), lambda s, quote=quote: [quote] * 5, t),
                                        collection_spec("stocks/quotes"))
            q.qid = "answer1"
            natural = quote["price"] - quote["prev_close"]
            old = quote["price"] - quote["price"] / (1 + quote["change_pct"] / 100)
            task.questions = [q]
            assert task.grade_submission(json.dumps({"answer1": natural}), at=t).score == 1.0
            tried += 1
            if abs(old - natural) > 1e-3 * abs(natural) + 1e-9:
                refused += task.grade_submission(json.dumps({"answer1": old}), at=t).score == 0.0
    assert tried == 150 and refused > 40
