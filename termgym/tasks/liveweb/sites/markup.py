"""What a simulated site answers with: :class:`Response`, HTML pages and their parts, JSON.

Sites call these as ``markup.page(...)``, ``markup.table(...)``. Each site wraps its pages in its own
:class:`Skin` (header, menu, banners, sidebar, footer: the clutter of a real page), so the sites do
not look alike; what they share is how a value is marked up, so that a program can read any page:

* a record sits in an element with ``data-src="<site>/<collection>"`` (``…@<unix time>`` on history
  pages: the record as it was then) and ``data-key="<key>"`` (:func:`rec`);
* a value inside it sits in an element with ``data-field`` and ``data-value`` (the exact value, as
  sortable tables carry it) while the element's text may be rounded (:func:`val`).
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlencode


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


def json_response(obj: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(obj, separators=(",", ":")).encode(), "application/json")


def esc(x: object) -> str:
    return html.escape(str(x))


def link(href: str, text: object, rel: str = "") -> str:
    rel_attr = f' rel="{rel}"' if rel else ""
    return f'<a href="{esc(href)}"{rel_attr}>{esc(text)}</a>'


# -- dates ---------------------------------------------------------------------------------------------


def utc(t: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(int(t), _dt.timezone.utc)


def day_iso(t: float) -> str:
    """``2026-03-04``."""
    return utc(t).strftime("%Y-%m-%d")


def day_text(t: float) -> str:
    """``4 March 2026``."""
    d = utc(t)
    return f"{d.day} {d:%B %Y}"


def moment_text(t: float) -> str:
    """``14:00 UTC on 4 March 2026``."""
    return f"{utc(t):%H:%M} UTC on {day_text(t)}"


def parse_day(text: str, compact: bool = False) -> int | None:
    """Unix time of the start of a day given as ``YYYY-MM-DD`` (or ``YYYYMMDD``); None if malformed."""
    try:
        d = _dt.datetime.strptime(text, "%Y%m%d" if compact else "%Y-%m-%d")
    except ValueError:
        return None
    return int(d.replace(tzinfo=_dt.timezone.utc).timestamp())


# -- values and records ----------------------------------------------------------------------------------


def rec(src: str, key: object, tag: str = "tr", cls: str = "") -> str:
    """The opening tag of a record element (close it yourself)."""
    c = f' class="{cls}"' if cls else ""
    return f'<{tag}{c} data-src="{esc(src)}" data-key="{esc(key)}">'


def val(name: str, value: object, text: object | None = None, tag: str = "td", cls: str = "",
        raw: bool = False) -> str:
    """An element showing ``text`` (default: the value) with the exact value in ``data-value``.

    ``raw``: ``text`` is already HTML (a link, a badge).
    """
    if isinstance(value, float):
        exact = repr(value)
    else:
        exact = str(value)
    kind = ' data-type="text"' if isinstance(value, str) else ""
    c = f' class="{cls}"' if cls else ""
    shown = esc(value if text is None else text) if not raw else str(text)
    return f'<{tag}{c} data-field="{esc(name)}" data-value="{esc(exact)}"{kind}>{shown}</{tag}>'


# -- the page frame ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Skin:
    """The look of one site: its markup around the content, and the clutter real pages carry.

    ``top`` is the header (``{title}``, ``{nav}`` and ``{clock}`` are filled in); ``banner`` comes
    before the content, ``aside`` after it, then ``footer``. ``nav_item`` formats one menu entry.
    """

    body_class: str = "site"
    head: str = ""
    top: str = "<header><h1>{title}</h1><nav>{nav}</nav></header>"
    nav_item: str = "{link}"
    nav_sep: str = " | "
    banner: str = ""
    main_open: str = "<main>"
    main_close: str = "</main>"
    heading: str = "<h2>{text}</h2>"
    aside: str = ""
    footer: str = "<footer></footer>"


class Titled(Protocol):
    """Whatever a page is titled after: a site (``site.title`` heads every page and its ``<title>``)."""

    title: str


def page(site: Titled, skin: Skin, title: str, body: str, nav: list[tuple[str, str]] = (), t: float = 0.0,
         status: int = 200) -> Response:
    menu = skin.nav_sep.join(skin.nav_item.format(link=link(h, label)) for h, label in nav)
    clock = f"{utc(t):%Y-%m-%d %H:%M} UTC" if t else ""
    top = skin.top.format(title=esc(site.title), nav=menu, clock=clock)
    doc = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)} | {esc(site.title)}'
           f"</title>{skin.head}</head><body class=\"{skin.body_class}\">{top}{skin.banner}{skin.main_open}"
           f"{skin.heading.format(text=esc(title))}{body}{skin.main_close}{skin.aside}{skin.footer}</body></html>")
    return Response(status, doc.encode())


# -- tables, lists, pagination ------------------------------------------------------------------------------


def table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    """An HTML table; headers and cells are already-escaped HTML."""
    c = f' class="{cls}"' if cls else ""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{x}</td>" for x in row) + "</tr>" for row in rows)
    return f"<table{c}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def record_table(headers: list[str], rows: list[str], cls: str = "") -> str:
    """A table whose rows are ready-made ``<tr …>…</tr>`` record rows."""
    c = f' class="{cls}"' if cls else ""
    return f"<table{c}><thead><tr>{''.join(f'<th>{h}</th>' for h in headers)}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def sort_head(label: str, name: str | None, base: str, query: dict[str, str], view: dict[str, Any]) -> str:
    """A column heading that links to the list sorted by ``name`` (toggling the order when already so)."""
    if name is None:
        return esc(label)
    order = "asc" if view["sort"] == name and view["order"] == "desc" else "desc"
    params = {k: v for k, v in query.items() if k not in ("sort", "order", "page")}
    params.update(sort=name, order=order)
    mark = (" ▼" if view["order"] == "desc" else " ▲") if view["sort"] == name else ""
    return link(f"{base}?{urlencode(params)}", label) + mark


def with_query(base: str, query: dict[str, str], **changes: object) -> str:
    params = {k: v for k, v in query.items()}
    params.update({k: str(v) for k, v in changes.items()})
    return f"{base}?{urlencode(params)}" if params else base


def paginate(items: list, query: dict[str, str], per_page: int) -> tuple[list, int, int]:
    """The slice for ``?page=N`` (1-based, clamped), the page number and the page count."""
    pages = max(1, math.ceil(len(items) / per_page))
    try:
        n = int(query.get("page", "1"))
    except ValueError:
        n = 1
    n = min(max(n, 1), pages)
    return items[(n - 1) * per_page : n * per_page], n, pages


def pager(base: str, n: int, pages: int, query: dict[str, str] | None = None) -> str:
    """Previous/next links (``rel="prev"``/``rel="next"``) keeping the other query parameters."""
    query = dict(query or {})
    parts = [f"Page {n} of {pages}"]
    if n > 1:
        parts.append(link(with_query(base, query, page=n - 1), "« previous", rel="prev"))
    if n < pages:
        parts.append(link(with_query(base, query, page=n + 1), "next »", rel="next"))
    return "<p class=\"pager\">" + " &middot; ".join(parts) + "</p>"


def compact(x: float, prefix: str = "") -> str:
    """Abbreviate a large number as list pages do: 1234567 -> 1.23M."""
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= div:
            return f"{prefix}{x / div:.2f}{suffix}"
    return f"{prefix}{x:.2f}"


def rounded_price(x: float) -> str:
    """Round a price for a list page: cents above 1, four significant digits below."""
    return f"{x:,.2f}" if abs(x) >= 1 else f"{x:.4g}"


def search_form(action: str, name: str, value: str = "", placeholder: str = "Search") -> str:
    return (f'<form action="{esc(action)}" method="get" role="search"><input type="search" name="{esc(name)}" '
            f'value="{esc(value)}" placeholder="{esc(placeholder)}"><button>Go</button></form>')
