"""``news.test``: a link-aggregator news site modelled on Hacker News.

A story is posted every twenty minutes or so; its points and comments grow and saturate; the
front page ranks stories by points decayed with age, so the ranking changes every few minutes and
stories slide off as they age. The site shows the stories of the last four days.
"""

from __future__ import annotations

import math
from typing import Any

from termgym.tasks.liveweb.noise import DAY, HOUR, HashRandom, unit01
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec, Response, Site, WorldView
from termgym.tasks.liveweb.sites.naming import coined_word

GAP = 20 * 60
WINDOW = 4 * DAY
PER_PAGE = 30

STORIES = CollectionSpec(
    site="news", name="stories", noun="story", plural="stories", key_field="id", name_field="title",
    alias_fields=("title", "id"), api_path="/api/stories", mention="\u201c{title}\u201d",
    fields={
        "points": FieldSpec("points", "number of points", "int", "", 0.02, 1.0),
        "comments": FieldSpec("comments", "number of comments", "int", "", 0.02, 1.0),
        "rank": FieldSpec("rank", "front-page rank", "int", "", 0.0, 0.0, rankable=False, history=True),
        "posted": FieldSpec("posted", "time posted (unix)", "int", "", 0.0, 0.0, rankable=False),
    },
    history="front", api_fields=("points",),
)

_ADJ = ["tiny", "fast", "open-source", "minimal", "distributed", "self-hosted", "typed", "quiet", "forgotten",
        "surprising", "portable", "reversible", "lazy", "honest", "declarative", "offline-first"]
_NOUN = ["database", "compiler", "text editor", "scheduler", "search engine", "file system", "shell",
         "garbage collector", "spreadsheet", "web server", "package manager", "keyboard", "telescope",
         "radio", "map renderer", "type checker", "bicycle", "notebook"]
_TOPIC = ["Rust", "Postgres", "SQLite", "Lisp", "WebAssembly", "Linux", "RISC-V", "Zig", "Python", "Go",
          "OCaml", "Erlang", "Emacs", "GPUs", "satellites", "solar panels", "trains", "birds"]
_TITLES = [
    "Show TN: {W}, {a_adj} {noun} written in {topic}",
    "{W} raises ${n}M to build {a_adj} {noun}",
    "The {adj} history of the {noun} at {W}",
    "Why {W} rewrote their {noun} in {topic}",
    "Ask TN: Is {a_adj} {noun} worth it in {year}?",
    "{W}: what we learned running {topic} for {n} years",
    "{A_adj} {noun} in {n} lines of {topic}",
    "{W} {noun} ({year})",
    "How {W} scaled a {noun} to {n} million users",
    "I built {a_adj} {noun} with {topic} and {W}",
]
_DOMAINS = ["github.com", "blog.{w}.dev", "{w}.org", "arxiv.org", "nytimes.com", "lwn.net", "{w}.io",
            "medium.com", "youtube.com", "{w}.substack.com"]
_AUTHORS = ["pg", "mira", "dtan", "kestrel", "jlo", "nullptr", "ferris", "quasar", "lambda_", "hwind", "ozy",
            "sable", "brisk", "tuple", "ivo", "nadia_k", "ratchet", "polyglot", "moss", "ember"]


def _story(world: WorldView, anchor: int, i: int) -> dict:
    """Story number ``i`` of this world: posted at ``anchor + i * GAP`` plus jitter."""
    key = world.noise_key("story", i)
    rng = HashRandom(key)
    w = coined_word(rng)
    adj = rng.choice(_ADJ)
    a_adj = ("an " if adj[0] in "aeiou" else "a ") + adj
    title = rng.choice(_TITLES).format(W=w, adj=adj, a_adj=a_adj, A_adj=a_adj.capitalize(), noun=rng.choice(_NOUN),
                                       topic=rng.choice(_TOPIC), n=rng.randint(2, 90), year=2026)
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

    def generate(self, world: WorldView) -> Any:
        # Stories are made lazily by index; the static part is the anchor and a per-world cache.
        return {"anchor": world.base_time - 20 * DAY, "cache": {}}

    def _stories_between(self, world: WorldView, static: Any, lo: float, hi: float) -> list[dict]:
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

    def records(self, world: WorldView, static: Any, t: int) -> dict[str, list[dict]]:
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

    NAV = [("/", "top"), ("/newest", "new"), ("/past", "past"), ("/front", "front pages"), ("/ask", "ask"),
           ("/submit", "submit")]
    SKIN = markup.Skin(
        body_class="tn",
        head='<style>td.title a{color:#000}.subtext{font-size:7pt;color:#828282}</style>',
        top=('<table id="hnmain" width="85%"><tr class="top"><td><b><a href="/">{title}</a></b> {nav}</td>'
             '<td align="right"><a href="/login">login</a></td></tr></table>'),
        nav_sep=" | ",
        banner='<p class="notice">Applications are open for the Spring batch. <a href="/jobs">Apply</a></p>',
        main_open='<center><table width="85%"><tr><td>', main_close="</td></tr></table></center>",
        heading='<span class="pagetop">{text}</span>',
        footer=('<center class="yclinks"><a href="/guidelines">Guidelines</a> | <a href="/faq">FAQ</a> | '
                '<a href="/lists">Lists</a> | <a href="/security">Security</a> | <a href="/legal">Legal</a> | '
                '<a href="/contact">Contact</a><form action="/search">Search: <input name="q"></form></center>'),
    )
    PER_PAGE = 30

    def detail_path(self, collection: str, key: object) -> str:
        return f"/item?id={key}"

    def history_path(self, collection: str, key: object, at: int) -> str:
        return f"/front?day={markup.day_iso(at)}&hour={markup.utc(at).hour}"

    def list_path(self, collection: str, scope: list[dict], sort: str | None = None, order: str = "desc") -> str:
        extra = "&per_page=100" + (f"&sort={sort}&order={order}" if sort else "")
        if len(scope) == 1 and scope[0]["op"] == "==" and scope[0]["field"] in ("author", "domain"):
            name = "user?id" if scope[0]["field"] == "author" else "from?site"
            return f"/{name}={scope[0]['value']}{extra}"
        if len(scope) == 1 and scope[0]["field"] == "posted" and scope[0]["op"] == "between":
            return f"/past?day={markup.day_iso(scope[0]['lo'])}{extra}"
        if len(scope) == 1 and scope[0]["field"] == "rank" and scope[0]["op"] == "<=":
            return "/?per_page=30"
        if not scope:
            return f"/newest?{extra[1:]}"
        raise ValueError(f"{self.host} has no list for {scope}")

    def _rows(self, stories: list[dict], t: float, src: str = "news/stories", numbered: bool = True) -> str:
        rows = []
        for i, s in enumerate(stories, 1):
            age_h = max(0, int((t - s["posted"]) // HOUR))
            href = f"/item?id={s['id']}"
            rank = markup.val("rank", s["rank"], f"{s['rank']}.", cls="rank") if numbered else f"<td>{i}.</td>"
            rows.append(
                markup.rec(src, s["id"], "tr", "athing") + rank
                + markup.val("title", s["title"], markup.link(href, s["title"]), cls="title", raw=True)
                + markup.val("domain", s["domain"], f"({s['domain']})", cls="site") + "</tr>"
                + markup.rec(src, s["id"], "tr", "subtext") + "<td></td><td colspan=\"2\">"
                + markup.val("points", s["points"], f"{s['points']} points", tag="span") + " by "
                + markup.val("author", s["author"], markup.link(f"/user?id={s['author']}", s["author"]), tag="span",
                             raw=True)
                + markup.val("posted", s["posted"], f" {age_h} hours ago", tag="span") + " | "
                + markup.val("comments", s["comments"], markup.link(href, f"{s['comments']} comments"), tag="span",
                             raw=True) + "</td></tr>")
        return '<table class="itemlist">' + "".join(rows) + "</table>"

    def _listing(self, stories: list[dict], t: float, base: str, query: dict[str, str], default: str = "rank",
                 order: str = "asc") -> str:
        view = self.list_view(stories, STORIES, query, default, order)
        sorts = " · ".join(markup.link(markup.with_query(base, {k: v for k, v in query.items() if k not in
                                                                ("sort", "order", "page")}, sort=f, order="desc"),
                                       f"by {f}") for f in ("points", "comments", "posted"))
        return (f'<p class="sorts">sort: {sorts}</p>' + self._rows(view["shown"], t)
                + markup.pager(base, view["page"], view["pages"], query))

    def html(self, world: WorldView, t: float, path: str, query: dict[str, str]) -> Response:
        stories = world.records(self.key, t)["stories"]
        if path in ("/", "/news", "/index.html"):
            top = {k: v for k, v in query.items() if k != "per_page"}
            return self.page("Top stories", self._listing(stories, t, "/", top), t)
        if path == "/newest":
            return self.page("New stories", self._listing(stories, t, "/newest", query, "posted", "desc"), t)
        if path == "/past":
            day = markup.parse_day(query.get("day", markup.day_iso(t - DAY)))
            if day is None:
                return self.page("Past", "<p>Give the day as day=YYYY-MM-DD.</p>", t, status=400)
            posted = [s for s in stories if day <= s["posted"] < day + DAY]
            nav = (markup.link(f"/past?day={markup.day_iso(day - DAY)}", "« day before") + " · "
                   + markup.link(f"/past?day={markup.day_iso(day + DAY)}", "day after »"))
            body = (f"<p>Stories posted on {markup.day_text(day)} (UTC), {len(posted)} in all; the site keeps four "
                    f"days. {nav}</p>" + self._listing(posted, t, "/past", query, "points", "desc"))
            return self.page(f"Stories of {markup.day_iso(day)}", body, t)
        if path == "/front":
            day = markup.parse_day(query.get("day", markup.day_iso(t)))
            try:
                hour = int(query.get("hour", "0"))
            except ValueError:
                hour = -1
            if day is None or not 0 <= hour <= 23:
                return self.page("Front pages", "<p>Pick a moment: /front?day=YYYY-MM-DD&amp;hour=0..23 (UTC).</p>",
                                 t, status=400)
            at = day + hour * HOUR
            if at > t:
                return self.page("Front pages", "<p>That moment has not happened yet.</p>", t, status=404)
            then = [s for s in world.records(self.key, at)["stories"] if s["rank"] <= 30]
            links = (markup.link(f"/front?day={markup.day_iso(at - HOUR)}&hour={markup.utc(at - HOUR).hour}",
                                 "« an hour earlier") + " · "
                     + markup.link(f"/front?day={markup.day_iso(at + HOUR)}&hour={markup.utc(at + HOUR).hour}",
                                   "an hour later »"))
            body = (f"<p>The front page as it was at {markup.moment_text(at)}. {links}</p>"
                    + self._rows(then, at, src=f"news/stories@{at}"))
            return self.page(f"Front page, {markup.moment_text(at)}", body, t)
        if path in ("/user", "/from"):
            field, value = ("author", query.get("id", "")) if path == "/user" else ("domain", query.get("site", ""))
            mine = [s for s in stories if s[field] == value]
            if not mine:
                return self.not_found(f"{path}?{field}={value}", t)
            what = f"Submissions by {value}" if path == "/user" else f"Stories from {value}"
            body = (f"<p>{len(mine)} stories in the last four days.</p>"
                    + self._listing(mine, t, path, query, "posted", "desc"))
            return self.page(what, body, t)
        if path == "/item":
            s = next((x for x in stories if str(x["id"]) == query.get("id", "")), None)
            if s is not None:
                body = (markup.rec("news/stories", s["id"], "table", "fatitem")
                        + "<tr>" + markup.val("title", s["title"], tag="td", cls="title")
                        + markup.val("domain", s["domain"], f"({s['domain']})", tag="td") + "</tr>"
                        + '<tr><td class="subtext" colspan="2">'
                        + markup.val("points", s["points"], f"{s['points']} points", tag="span") + " by "
                        + markup.val("author", s["author"], markup.link(f"/user?id={s['author']}", s["author"]),
                                     tag="span", raw=True)
                        + " | posted " + markup.val("posted", s["posted"], f"{markup.utc(s['posted']):%Y-%m-%d %H:%M} UTC",
                                                    tag="span")
                        + " | " + markup.val("comments", s["comments"], f"{s['comments']} comments", tag="span")
                        + " | front-page rank " + markup.val("rank", s["rank"], tag="span")
                        + "</td></tr></table>"
                        + '<form class="reply"><textarea name="text" rows="6" cols="60"></textarea>'
                          "<button>add comment</button></form>")
                return self.page(s["title"], body, t)
        if path in ("/ask", "/submit", "/login", "/jobs"):
            return self.page(path.strip("/"), "<p>You have to be logged in to do that.</p>", t)
        return self.not_found(path, t)
