"""``books.test``: a book shop catalogue modelled on books.toscrape.com / Open Library.

The catalogue grows (a new book every eight hours, listed first), prices follow daily discounts,
stock levels drift and reviews accumulate. Ratings (1–5 stars) never change.
"""

from __future__ import annotations

import math
from typing import Any

from termgym.tasks.liveweb.noise import DAY, HOUR, HashRandom, stable_hash, unit01, value_noise
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec, Response, Site, WorldView
from termgym.tasks.liveweb.sites.naming import coined_word, slug

BASE_BOOKS = 240
#: Writers in a world's catalogue: most have several books.
N_AUTHORS = 90
NEW_EVERY = 8 * HOUR
PER_PAGE = 20
GENRES = ["Fantasy", "Mystery", "Science Fiction", "History", "Poetry", "Travel", "Cooking", "Biography",
          "Romance", "Philosophy"]
_DISCOUNTS = [(0.70, 0.0), (0.85, 0.10), (0.95, 0.20), (1.01, 0.35)]  # (cumulative probability, discount)
_TITLE = ["The {a} of {W}", "{W} and the {b}", "A {c} in {W}", "The Last {b} of {W}", "{W}'s {b}",
          "Notes on {a} from {W}", "Under the {c} Sky of {W}", "The {b} of {W}", "{W}: A {a}", "When {W} Fell"]
_A = ["Memory", "Silence", "Harvest", "Cartography", "Weight", "Grammar", "Geometry", "Patience", "Rivers"]
_B = ["Lighthouse", "Orchard", "Clockmaker", "Cartographer", "Archive", "Salt Road", "Glass Garden", "Ferryman"]
_C = ["Winter", "Copper", "Paper", "Hollow", "Violet", "Northern", "Quiet", "Burning"]
_FIRST = ["Ada", "Bruno", "Celia", "Dmitri", "Esme", "Farid", "Greta", "Hugo", "Ines", "Jonah", "Keiko", "Lars",
          "Mina", "Nico", "Olga", "Pavel", "Rosa", "Sami", "Tove", "Umar"]

BOOKS = CollectionSpec(
    site="books", name="books", noun="book", plural="books", key_field="id", name_field="title",
    alias_fields=("title", "id"), api_path="/api/books", mention="\u201c{title}\u201d by {author}",
    price_field="price", api_fields=("price",), history="daily",
    fields={
        "price": FieldSpec("price", "price in GBP", "money", "GBP", 0.0, 0.011, decimals=2, history=True),
        "rating": FieldSpec("rating", "star rating (1-5)", "int", "stars", 0.0, 0.0),
        "reviews": FieldSpec("reviews", "number of reviews", "int", "", 0.0, 0.0, listed=False),
        "in_stock": FieldSpec("in_stock", "number of copies in stock", "int", "", 0.0, 0.0, listed=False),
        "added": FieldSpec("added", "time added to the catalogue (unix)", "int", "", 0.0, 0.0, rankable=False),
    },
)


def _author(world: WorldView, j: int) -> str:
    """Author ``j`` of the world's pool (the seed's cast: the same in every variant)."""
    rng = HashRandom(stable_hash(world.seed, "author", j))
    return f"{rng.choice(_FIRST)} {coined_word(rng, 2)}"


def _book(world: WorldView, anchor: int, i: int) -> dict:
    key = world.noise_key("book", i)
    rng = HashRandom(key)
    w = coined_word(rng)
    title = rng.choice(_TITLE).format(W=w, a=rng.choice(_A), b=rng.choice(_B), c=rng.choice(_C))
    added = anchor - (BASE_BOOKS - i) * DAY if i < BASE_BOOKS else anchor + (i - BASE_BOOKS) * NEW_EVERY
    return {
        "id": 1000 + i, "title": title, "author": _author(world, rng.randint(0, N_AUTHORS - 1)),
        "genre": GENRES[i % len(GENRES)] if rng.random() < 0.3 else rng.choice(GENRES),
        "list_price": round(rng.uniform(4.5, 58), 2), "rating": rng.choice((1, 2, 3, 3, 4, 4, 4, 5, 5)),
        "added": int(added + rng.uniform(0, 0.9) * min(NEW_EVERY, DAY)), "review_every": rng.uniform(0.3, 4) * DAY,
        "key": key,
    }


class BooksSite(Site, key="books", host="books.test", title="Books to Browse (simulated)",
                live_host="openlibrary.org"):
    collections = {"books": BOOKS}

    def generate(self, world: WorldView) -> Any:
        return {"anchor": world.base_time - 30 * DAY, "cache": {}}

    def _catalogue(self, world: WorldView, static: Any, t: float) -> list[dict]:
        anchor, cache = static["anchor"], static["cache"]
        last = BASE_BOOKS + max(0, math.floor((t - anchor) / NEW_EVERY) + 1)
        out = []
        for i in range(last + 1):
            book = cache.get(i)
            if book is None:
                book = cache.setdefault(i, _book(world, anchor, i))
            if book["added"] <= t:
                out.append(book)
        return out

    def records(self, world: WorldView, static: Any, t: int) -> dict[str, list[dict]]:
        day = int(t // DAY)
        out = []
        for b in self._catalogue(world, static, t):
            u = unit01(b["key"], day)
            discount = next(d for p, d in _DISCOUNTS if u < p)
            stock = int(21 * (0.5 + 0.5 * value_noise(b["key"] + 3, t / (1.7 * DAY))))
            out.append({"id": b["id"], "title": b["title"], "author": b["author"], "genre": b["genre"],
                        "price": round(b["list_price"] * (1 - discount), 2), "rating": b["rating"],
                        "reviews": int((t - b["added"]) // b["review_every"]), "in_stock": max(0, min(stock, 20)),
                        "added": b["added"]})
        out.sort(key=lambda r: (-r["added"], r["id"]))  # newest first, as the catalogue lists them
        return {"books": out}

    NAV = [("/", "Home"), ("/search", "Search")] + [(f"/genre/{slug(g)}", g) for g in GENRES]
    SKIN = markup.Skin(
        body_class="shop",
        head='<link rel="stylesheet" href="/static/shop.css">',
        top=('<div class="page_inner"><div class="header"><a href="/">{title}</a> <span class="basket">Basket: £0.00 '
             '<a href="/basket">View basket</a></span></div><ul class="breadcrumb"><li><a href="/">Home</a></li></ul>'
             '<div class="side_categories"><h3>Books</h3><ul class="nav-list">{nav}</ul></div>'),
        nav_item="<li>{link}</li>", nav_sep="",
        banner=('<div class="alert">Free delivery on orders over £25! Use code READMORE for 10% off your first '
                'order.</div>'),
        main_open='<section class="col-sm-8">', main_close="</section>",
        heading='<div class="page-header"><h1>{text}</h1></div>',
        aside='<div class="recent">Recently viewed: (none) · <a href="/gift-cards">Gift cards</a></div></div>',
        footer=('<footer class="footer"><p>Books to Browse (simulated) is a demo shop: prices and stock change '
                'daily.</p><a href="/delivery">Delivery</a> · <a href="/returns">Returns</a> · '
                '<a href="/privacy">Privacy</a></footer>'),
    )
    PER_PAGE = 20

    def detail_path(self, collection: str, key: object) -> str:
        return f"/book/{key}"

    def history_path(self, collection: str, key: object, at: int) -> str:
        return f"/book/{key}/prices"

    def list_path(self, collection: str, scope: list[dict], sort: str | None = None, order: str = "desc") -> str:
        extra = "per_page=100" + (f"&sort={sort}&order={order}" if sort else "")
        if len(scope) == 1 and scope[0]["op"] == "==" and scope[0]["field"] == "genre":
            return f"/genre/{slug(scope[0]['value'])}?{extra}"
        if len(scope) == 1 and scope[0]["op"] == "==" and scope[0]["field"] == "author":
            return f"/search?q={scope[0]['value'].replace(' ', '+')}&{extra}"
        if not scope:
            return f"/?{extra}"
        raise ValueError(f"{self.host} has no list for {scope}")

    def _card(self, b: dict) -> str:
        stars = "★" * b["rating"] + "☆" * (5 - b["rating"])
        return (markup.rec("books/books", b["id"], "article", "product_pod")
                + markup.val("title", b["title"], markup.link(f"/book/{b['id']}", b["title"]), tag="h3", raw=True)
                + markup.val("author", b["author"], tag="p", cls="author")
                + markup.val("genre", b["genre"], tag="p", cls="genre")
                + markup.val("rating", b["rating"], stars, tag="p", cls="star-rating")
                + markup.val("price", b["price"], f"£{b['price']:.2f}", tag="p", cls="price_color")
                + markup.val("added", b["added"], f"added {markup.day_iso(b['added'])}", tag="p", cls="added")
                + '<p class="availability">' + ("In stock" if b["in_stock"] else "Out of stock") + "</p>"
                + '<button class="btn">Add to basket</button></article>')

    def _listing(self, books: list[dict], base: str, query: dict[str, str]) -> str:
        view = self.list_view(books, BOOKS, query, "added", "desc")
        params = {k: v for k, v in query.items() if k not in ("sort", "order", "page")}
        sorts = " · ".join(markup.link(markup.with_query(base, params, sort=f, order=o), label) for f, o, label in (
            ("added", "desc", "newest"), ("price", "asc", "price: low to high"), ("price", "desc", "price: high to low"),
            ("rating", "desc", "rating")))
        return (f'<form class="form-horizontal"><strong>{view["count"]}</strong> results. Sort by: {sorts}</form>'
                + '<ol class="row">' + "".join(f"<li>{self._card(b)}</li>" for b in view["shown"]) + "</ol>"
                + markup.pager(base, view["page"], view["pages"], query))

    def html(self, world: WorldView, t: float, path: str, query: dict[str, str]) -> Response:
        books = world.records(self.key, t)["books"]
        if path in ("/", "/index.html"):
            return self.page("All products", self._listing(books, "/", query), t)
        if path.startswith("/genre/"):
            want = path.rsplit("/", 1)[-1]
            genre = next((g for g in GENRES if slug(g) == want), None)
            if genre is None:
                return self.not_found(path, t)
            return self.page(genre, self._listing([b for b in books if b["genre"] == genre], path, query), t)
        if path == "/search":
            q = query.get("q", "").strip().lower()
            hits = [b for b in books if q and (q in b["title"].lower() or q in b["author"].lower())]
            body = markup.search_form("/search", "q", q, "Title or author")
            body += self._listing(hits, "/search", query) if q else "<p>Search by title or author.</p>"
            return self.page("Search", body, t)
        if path.startswith("/book/"):
            rest = path[len("/book/"):].strip("/")
            ref, _, sub = rest.partition("/")
            b = next((x for x in books if str(x["id"]) == ref), None)
            if b is None:
                return self.not_found(path, t)
            if sub == "prices":
                return self._prices(world, t, b)
            if sub:
                return self.not_found(path, t)
            info = [("UPC", "id", None), ("Author", "author", None), ("Genre", "genre", None),
                    ("Price", "price", f"£{b['price']:.2f}"), ("Availability", "in_stock", f"In stock ({b['in_stock']} available)"
                                                                if b["in_stock"] else "Out of stock (0 available)"),
                    ("Number of reviews", "reviews", None), ("Rating", "rating", f"{b['rating']} of 5 stars"),
                    ("Added", "added", markup.day_iso(b["added"]))]
            rows = "".join(f"<tr><th>{label}</th>{markup.val(name, b[name], text)}</tr>" for label, name, text in info)
            body = (markup.rec("books/books", b["id"], "article", "product_page")
                    + markup.val("title", b["title"], tag="h2")
                    + '<p class="description">A novel of quiet ambition. Readers call it unforgettable.</p>'
                    + f'<table class="table table-striped">{rows}</table></article>'
                    + "<p>" + markup.link(f"/book/{b['id']}/prices", "Price history (30 days)") + "</p>")
            return self.page(b["title"], body, t)
        return self.not_found(path, t)

    def _prices(self, world: WorldView, t: float, book: dict) -> Response:
        rows = []
        for at in self.history_times("books", 0, t):
            r = next((x for x in world.records(self.key, at)["books"] if x["id"] == book["id"]), None)
            if r is not None:
                rows.append(markup.rec(f"books/books@{at}", book["id"]) + f"<td>{markup.day_iso(at)}</td>"
                            + markup.val("title", r["title"], r["id"])
                            + markup.val("price", r["price"], f"£{r['price']:.2f}") + "</tr>")
        body = (f"<p>Our price for “{markup.esc(book['title'])}” on each of the last 30 days (prices change at "
                "midnight UTC).</p>" + markup.record_table(["Day", "UPC", "Price"], rows, "table"))
        return self.page(f"Price history: {book['title']}", body, t)
