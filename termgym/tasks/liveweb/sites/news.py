"""``news.test``: a link-aggregator news site modelled on Hacker News.

A story is posted every twenty minutes or so; its points and comments grow and saturate; the
front page ranks stories by points decayed with age, so the ranking changes every few minutes and
stories slide off as they age. The site shows the stories of the last four days.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from termgym.tasks.liveweb.noise import DAY, HOUR, HashRandom, unit01
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec, Response, Site
from termgym.tasks.liveweb.sites.naming import coined_word

if TYPE_CHECKING:
    from termgym.tasks.liveweb.world import World

GAP = 20 * 60
WINDOW = 4 * DAY
PER_PAGE = 30

STORIES = CollectionSpec(
    site="news", name="stories", noun="story", plural="stories", key_field="id", name_field="title",
    alias_fields=("title", "id"), api_path="/api/stories", mention="\u201c{title}\u201d",
    fields={
        "points": FieldSpec("points", "number of points", "int", "", 0.02, 1.0),
        "comments": FieldSpec("comments", "number of comments", "int", "", 0.02, 1.0),
        "rank": FieldSpec("rank", "front-page rank", "int", "", 0.0, 0.0, rankable=False),
    },
)

_ADJ = ["tiny", "fast", "open-source", "minimal", "distributed", "self-hosted", "typed", "quiet", "forgotten",
        "surprising", "portable", "reversible", "lazy", "honest", "declarative", "offline-first"]
_NOUN = ["database", "compiler", "text editor", "scheduler", "search engine", "file system", "shell",
         "garbage collector", "spreadsheet", "web server", "package manager", "keyboard", "telescope",
         "radio", "map renderer", "type checker", "bicycle", "notebook"]
_TOPIC = ["Rust", "Postgres", "SQLite", "Lisp", "WebAssembly", "Linux", "RISC-V", "Zig", "Python", "Go",
          "OCaml", "Erlang", "Emacs", "GPUs", "satellites", "solar panels", "trains", "birds"]
_TITLES = [
    "Show TN: {W}, a {adj} {noun} written in {topic}",
    "{W} raises ${n}M to build a {adj} {noun}",
    "The {adj} history of the {noun} at {W}",
    "Why {W} rewrote their {noun} in {topic}",
    "Ask TN: Is a {adj} {noun} worth it in {year}?",
    "{W}: what we learned running {topic} for {n} years",
    "A {adj} {noun} in {n} lines of {topic}",
    "{W} {noun} ({year})",
    "How {W} scaled a {noun} to {n} million users",
    "I built a {adj} {noun} with {topic} and {W}",
]
_DOMAINS = ["github.com", "blog.{w}.dev", "{w}.org", "arxiv.org", "nytimes.com", "lwn.net", "{w}.io",
            "medium.com", "youtube.com", "{w}.substack.com"]
_AUTHORS = ["pg", "mira", "dtan", "kestrel", "jlo", "nullptr", "ferris", "quasar", "lambda_", "hwind", "ozy",
            "sable", "brisk", "tuple", "ivo", "nadia_k", "ratchet", "polyglot", "moss", "ember"]


def _story(world: World, anchor: int, i: int) -> dict:
    """Story number ``i`` of this world: posted at ``anchor + i * GAP`` plus jitter."""
    key = world.noise_key("story", i)
    rng = HashRandom(key)
    w = coined_word(rng)
    title = rng.choice(_TITLES).format(W=w, adj=rng.choice(_ADJ), noun=rng.choice(_NOUN), topic=rng.choice(_TOPIC),
                                       n=rng.randint(2, 90), year=2026)
    return {
        "id": 40_000_000 + world.seed % 1000 * 100_000 + i, "title": title,
        "author": rng.choice(_AUTHORS) + (str(rng.randint(1, 99)) if rng.random() < 0.4 else ""),
        "domain": rng.choice(_DOMAINS).format(w=w.lower()), "posted": int(anchor + i * GAP + 0.8 * GAP * unit01(key, 1)),
        # Heavy-tailed popularity: most stories stay small, a few take off.
        "max_points": int(2 + 1200 * rng.random() ** 3.5), "tau": rng.uniform(1.5, 8) * HOUR,
        "comment_ratio": rng.uniform(0.15, 1.1),
    }


class NewsSite(Site, key="news", host="news.test", title="Terminal News (simulated)",
               live_host="hacker-news.firebaseio.com"):
    collections = {"stories": STORIES}

    def generate(self, world: World) -> Any:
        # Stories are made lazily by index; the static part is the anchor and a per-world cache.
        return {"anchor": world.base_time - 20 * DAY, "cache": {}}

    def _stories_between(self, world: World, static: Any, lo: float, hi: float) -> list[dict]:
        anchor, cache = static["anchor"], static["cache"]
        first = max(0, math.floor((lo - anchor) / GAP) - 1)
        last = math.floor((hi - anchor) / GAP) + 1
        out = []
        for i in range(first, last + 1):
            story = cache.get(i)
            if story is None:
                story = cache.setdefault(i, _story(world, anchor, i))
            if lo < story["posted"] <= hi:
                out.append(story)
        return out

    def records(self, world: World, static: Any, t: int) -> dict[str, list[dict]]:
        out = []
        for s in self._stories_between(world, static, t - WINDOW, t):
            age = t - s["posted"]
            points = 1 + int(s["max_points"] * (1 - math.exp(-age / s["tau"])))
            comments = int(points * s["comment_ratio"] * (1 - math.exp(-age / (1.5 * s["tau"]))))
            score = (points - 1) / (age / HOUR + 2) ** 1.8
            out.append(({"id": s["id"], "title": s["title"], "author": s["author"], "domain": s["domain"],
                         "points": points, "comments": comments, "posted": s["posted"]}, score))
        out.sort(key=lambda pair: (-pair[1], -pair[0]["posted"]))
        records = [r for r, _ in out]
        for i, r in enumerate(records, 1):
            r["rank"] = i
        return {"stories": records}

    NAV = [("/", "top"), ("/newest", "new")]

    def _rows(self, stories: list[dict], t: float) -> str:
        items = []
        for s in stories:
            age_h = max(0, int((t - s["posted"]) // HOUR))
            href = f"/item?id={s['id']}"
            items.append(f"<li value=\"{s['rank']}\">{markup.link(href, s['title'])} ({markup.esc(s['domain'])})"
                         f"<br>{s['points']} points by {markup.esc(s['author'])} {age_h} hours ago | "
                         f"{markup.link(href, str(s['comments']) + ' comments')}</li>")
        return "<ol>" + "".join(items) + "</ol>"

    def html(self, world: World, t: float, path: str, query: dict[str, str]) -> Response:
        if path in ("/", "/news", "/index.html", "/newest"):
            lt = self.list_time(t)
            stories = world.records(self.key, lt)["stories"]
            if path == "/newest":
                stories = sorted(stories, key=lambda s: -s["posted"])
            shown, n, pages = markup.paginate(stories, query, PER_PAGE)
            base = "/newest" if path == "/newest" else "/"
            body = ("<p>Front page, refreshed every five minutes. Points and comments on story pages are "
                    "live.</p>" + self._rows(shown, lt) + markup.pager(base, n, pages))
            return self.page("Newest stories" if path == "/newest" else "Top stories", body)
        if path == "/item":
            s = self.find(world, t, "stories", lambda s: str(s["id"]) == query.get("id", ""))
            if s is not None:
                body = markup.dl([("Title", s["title"]), ("Site", s["domain"]), ("Author", s["author"]),
                                  ("Points", s["points"]), ("Comments", s["comments"]),
                                  ("Front-page rank", s["rank"]), ("Posted (unix)", s["posted"])])
                return self.page(s["title"], body)
        return self.not_found(path)
