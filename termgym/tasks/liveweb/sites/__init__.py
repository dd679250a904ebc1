"""The simulated sites of the LIVEWEB world, by key."""

from termgym.tasks.liveweb.sites.base import CollectionSpec, FieldSpec, Response, Site
from termgym.tasks.liveweb.sites.books import BooksSite
from termgym.tasks.liveweb.sites.crypto import CryptoSite
from termgym.tasks.liveweb.sites.news import NewsSite
from termgym.tasks.liveweb.sites.stocks import StocksSite
from termgym.tasks.liveweb.sites.subnets import SubnetsSite

#: Every site, by key. Hosts: taostats.test, coingecko.test, stooq.test, news.test, books.test.
SITES: dict[str, Site] = {site.key: site for site in (SubnetsSite(), CryptoSite(), StocksSite(), NewsSite(), BooksSite())}


def collection_spec(src: str) -> CollectionSpec:
    """The :class:`CollectionSpec` of ``"site/collection"`` (or ``"site/collection@T"``, the collection at
    a past moment); ``KeyError`` naming it if unknown."""
    site, _, name = src.partition("@")[0].partition("/")
    try:
        return SITES[site].collections[name]
    except KeyError:
        raise KeyError(f"unknown LIVEWEB collection {src!r}") from None


__all__ = ["SITES", "CollectionSpec", "FieldSpec", "Response", "Site", "collection_spec"]
