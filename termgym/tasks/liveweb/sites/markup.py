"""What a simulated site answers with: :class:`Response`, HTML pages and their parts, JSON.

Sites call these as ``markup.page(...)``, ``markup.table(...)``: one vocabulary of small HTML pieces
shared by every site, so pages look alike and escaping happens in one place.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from termgym.tasks.liveweb.sites.base import Site


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


def link(href: str, text: object) -> str:
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def page(site: Site, title: str, body: str, nav: list[tuple[str, str]] = (), status: int = 200) -> Response:
    menu = " | ".join(link(h, t) for h, t in nav)
    doc = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{esc(title)} - {esc(site.title)}</title>"
           f"</head><body><header><h1>{esc(site.title)}</h1><nav>{menu}</nav></header>"
           f"<main><h2>{esc(title)}</h2>{body}</main>"
           f"<footer>{esc(site.host)} &middot; JSON API at {link('/api', '/api')}</footer></body></html>")
    return Response(status, doc.encode())


def not_found(site: Site, path: str, nav: list[tuple[str, str]] = ()) -> Response:
    return page(site, "Not found", f"<p>No page at {esc(path)}.</p>", nav, status=404)


def table(headers: list[str], rows: list[list[str]]) -> str:
    """An HTML table; cells are already-escaped HTML."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def dl(pairs: list[tuple[str, object]]) -> str:
    """A definition list of exact values (detail pages)."""
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs) + "</dl>"


def paginate(items: list, query: dict[str, str], per_page: int) -> tuple[list, int, int]:
    """The slice for ``?page=N`` (1-based, clamped), the page number and the page count."""
    pages = max(1, math.ceil(len(items) / per_page))
    try:
        n = int(query.get("page", "1"))
    except ValueError:
        n = 1
    n = min(max(n, 1), pages)
    return items[(n - 1) * per_page : n * per_page], n, pages


def pager(base: str, n: int, pages: int, extra: str = "") -> str:
    sep = "&" if "?" in base else "?"
    parts = [f"Page {n} of {pages}"]
    if n > 1:
        parts.append(link(f"{base}{sep}page={n - 1}{extra}", "« previous"))
    if n < pages:
        parts.append(link(f"{base}{sep}page={n + 1}{extra}", "next »"))
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
