"""``books.test``: a book shop catalogue modelled on books.toscrape.com / Open Library.

The catalogue grows (a new book every eight hours, listed first), prices follow daily discounts,
stock levels drift and reviews accumulate. Ratings (1–5 stars) never change.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from termgym.tasks.liveweb.noise import DAY, HOUR, HashRandom, unit01, value_noise
from termgym.tasks.liveweb.sites import markup
from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec, Response, Site
from termgym.tasks.liveweb.sites.naming import coined_word, slug

if TYPE_CHECKING:
    from termgym.tasks.liveweb.world import World

BASE_BOOKS = 240
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
    price_field="price",
    fields={
        "price": FieldSpec("price", "price in GBP", "money", "GBP", 0.0, 0.011, decimals=2),
        "rating": FieldSpec("rating", "star rating (1-5)", "int", "stars", 0.0, 0.0),
        "reviews": FieldSpec("reviews", "number of reviews", "int", "", 0.0, 0.0),
        "in_stock": FieldSpec("in_stock", "number of copies in stock", "int", "", 0.0, 0.0),
    },
)


def _book(world: World, anchor: int, i: int) -> dict:
    key = world.noise_key("book", i)
    rng = HashRandom(key)
    w = coined_word(rng)
    title = rng.choice(_TITLE).format(W=w, a=rng.choice(_A), b=rng.choice(_B), c=rng.choice(_C))
    added = anchor - (BASE_BOOKS - i) * DAY if i < BASE_BOOKS else anchor + (i - BASE_BOOKS) * NEW_EVERY
    return {
        "id": 1000 + i, "title": title, "author": f"{rng.choice(_FIRST)} {coined_word(rng, 2)}",
        "genre": GENRES[i % len(GENRES)] if rng.random() < 0.3 else rng.choice(GENRES),
        "list_price": round(rng.uniform(4.5, 58), 2), "rating": rng.choice((1, 2, 3, 3, 4, 4, 4, 5, 5)),
        "added": int(added + rng.uniform(0, 0.9) * min(NEW_EVERY, DAY)), "review_every": rng.uniform(0.3, 4) * DAY,
        "key": key,
    }


class BooksSite(Site, key="books", host="books.test", title="Books to Browse (simulated)",
                live_host="openlibrary.org"):
    collections = {"books": BOOKS}

    def generate(self, world: World) -> Any:
        return {"anchor": world.base_time - 30 * DAY, "cache": {}}

    def _catalogue(self, world: World, static: Any, t: float) -> list[dict]:
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

    def records(self, world: World, static: Any, t: int) -> dict[str, list[dict]]:
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

    NAV = [("/", "Catalogue")] + [(f"/genre/{slug(g)}", g) for g in GENRES]

    def _rows(self, books: list[dict]) -> list[list[str]]:
        return [[markup.link(f"/book/{b['id']}", b["title"]), markup.esc(b["author"]), markup.esc(b["genre"]), f"£{b['price']:.2f}",
                 "★" * b["rating"] + "☆" * (5 - b["rating"]), "In stock" if b["in_stock"] else "Out of stock"]
                for b in books]

    def html(self, world: World, t: float, path: str, query: dict[str, str]) -> Response:
        headers = ["Title", "Author", "Genre", "Price", "Rating", "Availability"]
        if path in ("/", "/index.html") or path.startswith("/genre/"):
            books = world.records(self.key, self.list_time(t))["books"]
            title = "All books (newest first)"
            if path.startswith("/genre/"):
                want = path.rsplit("/", 1)[-1]
                genre = next((g for g in GENRES if slug(g) == want), None)
                if genre is None:
                    return self.not_found(path)
                books = [b for b in books if b["genre"] == genre]
                title = f"{genre} (newest first)"
            shown, n, pages = markup.paginate(books, query, PER_PAGE)
            body = (f"<p>{len(books)} books. Listing refreshed every five minutes; stock counts and reviews "
                    "are on each book's page.</p>" + markup.table(headers, self._rows(shown)) + markup.pager(path, n, pages))
            return self.page(title, body)
        if path.startswith("/book/"):
            ref = path.rsplit("/", 1)[-1]
            b = self.find(world, t, "books", lambda b: str(b["id"]) == ref)
            if b is not None:
                body = markup.dl([("Title", b["title"]), ("Author", b["author"]), ("Genre", b["genre"]),
                                  ("Price (GBP)", f"{b['price']:.2f}"), ("Rating (stars)", b["rating"]),
                                  ("Reviews", b["reviews"]), ("Copies in stock", b["in_stock"]),
                                  ("Added (unix)", b["added"])])
                return self.page(b["title"], body)
        return self.not_found(path)
