"""The simulated world: deterministic from its seed, constant within a tick, evolving over time."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

import pytest

from termgym.tasks.liveweb.sites import SITES, collection_spec
from termgym.tasks.liveweb.world import DAY, HOUR, TICK, SimClock, World, stable_hash, tick_of


def test_same_seed_same_world_in_fresh_instances(world):
    other = World(world.seed)
    t = world.base_time + 1234
    for site in SITES:
        assert json.dumps(world.records(site, t)) == json.dumps(other.records(site, t))


def test_different_seeds_give_different_worlds(world):
    a, b = World(1), World(2)
    assert a.collection("crypto/coins", a.base_time)[0]["name"] != b.collection("crypto/coins", b.base_time)[0]["name"]


def test_stable_hash_is_process_independent():
    # Pinned: a change here would silently change every world and every task.
    assert stable_hash("base", 0) == stable_hash("base", 0)
    assert stable_hash("a", 1) != stable_hash("a", 2)
    assert stable_hash("base", 0) == 13466771034566785436


def test_world_is_constant_within_a_tick(world):
    t = tick_of(world.base_time + 5 * HOUR)
    assert world.records("crypto", t) == world.records("crypto", t + TICK - 1)
    assert world.records("crypto", t) != world.records("crypto", t + TICK)


def test_prices_move_and_rankings_change_over_time(world):
    t0 = world.base_time
    p0 = {c["id"]: c["price_usd"] for c in world.collection("crypto/coins", t0)}
    p1 = {c["id"]: c["price_usd"] for c in world.collection("crypto/coins", t0 + 6 * HOUR)}
    moved = [cid for cid in p0 if abs(p1[cid] / p0[cid] - 1) > 0.01]
    assert len(moved) > len(p0) // 2
    front0 = [s["id"] for s in world.collection("news/stories", t0)[:10]]
    front1 = [s["id"] for s in world.collection("news/stories", t0 + 2 * HOUR)[:10]]
    assert front0 != front1


def test_new_items_appear(world):
    t0 = world.base_time
    later = t0 + 3 * DAY
    assert len(world.collection("books/books", later)) > len(world.collection("books/books", t0))
    assert len(world.collection("subnets/subnets", later)) > len(world.collection("subnets/subnets", t0))
    new_story_ids = {s["id"] for s in world.collection("news/stories", later)} - {
        s["id"] for s in world.collection("news/stories", t0)}
    assert new_story_ids


def test_counters_only_grow(world):
    t0 = world.base_time
    before = {s["id"]: s for s in world.collection("news/stories", t0)}
    for s in world.collection("news/stories", t0 + 3 * HOUR):
        if s["id"] in before:
            assert s["points"] >= before[s["id"]]["points"]


def test_every_record_has_its_collections_fields(world):
    for site in SITES.values():
        for name, spec in site.collections.items():
            for record in world.records(site.key, world.base_time)[name]:
                for field in (spec.key_field, spec.name_field, *spec.alias_fields, *spec.fields):
                    assert field in record, (spec.src, field)


def test_unknown_collection_is_named_in_the_error(world):
    with pytest.raises(KeyError, match="crypto/nope"):
        world.collection("crypto/nope", world.base_time)
    with pytest.raises(KeyError, match="unknown LIVEWEB collection"):
        collection_spec("weather/today")


def test_list_pages_round_the_text_and_carry_the_exact_value(world):
    site = SITES["crypto"]
    t = tick_of(world.base_time) + 4 * TICK + 10
    coin = world.collection("crypto/coins", t)[0]
    listing = site.handle(world, t, "/", {}).body.decode()
    assert f'data-value="{coin["market_cap_usd"]}"' in listing  # exact, for sorting and for programs
    assert f">{coin['market_cap_usd']}<" not in listing  # shown rounded, e.g. $250.57B
    detail = site.handle(world, t, f"/coins/{coin['id']}", {}).body.decode()
    assert f"${coin['price_usd']}<" in detail and f"${coin['price_24h_ago_usd']}<" in detail


def test_a_source_with_a_moment_is_the_collection_then(world):
    t = world.base_time + 3 * DAY
    then = int(t - 7 * HOUR)
    assert world.collection(f"stocks/quotes@{then}", t) == world.collection("stocks/quotes", then)
    assert collection_spec(f"stocks/quotes@{then}") is collection_spec("stocks/quotes")


def test_sim_clock_speed_and_advance():
    clock = SimClock(1000.0, speed=0)
    assert clock.now() == 1000.0
    assert clock.advance(60) == 1060.0
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="speed"):
        SimClock(0, speed=-1)
    fast = SimClock(0, speed=1000)
    a = fast.now()
    assert fast.now() >= a
    fast.restart()
    assert fast.now() < 1000  # restarted just now


@pytest.mark.parametrize("site", list(SITES))
def test_every_site_serves_html_pages_and_the_api(world, site):
    s = SITES[site]
    t = world.base_time
    home = s.handle(world, t, "/", {})
    assert home.status == 200 and b"<html" in home.body and b"/api" not in home.body
    for api in ("paged", "bulk", "limited"):
        index = json.loads(s.handle(world, t, "/api", {}, api=api).body)
        for name, url in index["collections"].items():
            path, _, query = url.partition("?")
            payload = json.loads(s.handle(world, t, path, dict(parse_qsl(query)), api=api).body)
            assert payload["count"] >= len(payload["items"]) > 0
            if api == "bulk":
                assert payload["count"] == len(payload["items"])
            spec = s.collections[name]
            if api == "limited":  # summary fields only
                assert set(payload["items"][0]) == {spec.key_field, spec.name_field, *spec.api_fields}
            key = payload["items"][0][spec.key_field]
            one = json.loads(s.handle(world, t, f"{path}/{key}", {}, api=api).body)
            assert one["item"] == payload["items"][0]
    assert s.handle(world, t, "/no/such/page", {}).status == 404
    assert s.handle(world, t, "/api/nothing", {}).status == 404
    off = s.handle(world, t, "/api", {}, api="off")
    assert off.status == 404 and b"no public API" in off.body
