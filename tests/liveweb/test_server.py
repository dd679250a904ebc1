"""The world server over real sockets: routing by Host and episode, HTTP details, and load."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time

from termgym.tasks.liveweb.server import shared_server
from termgym.tasks.liveweb.world import DAY, SimClock, World


def get(port: int, host: str, path: str, headers: dict | None = None, conn=None):
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Host": host, **(headers or {})})
    resp = conn.getresponse()
    body = resp.read()
    if own:
        conn.close()
    return resp.status, resp.getheader("Content-Type"), body


def test_episode_port_serves_every_site_by_host(server, world):
    ep = server.open_episode(world, SimClock(world.base_time, speed=0), api="paged")
    try:
        for host in ("taostats.test", "coingecko.test", "stooq.test", "news.test", "books.test"):
            status, ctype, body = get(ep.port, host, "/")
            assert status == 200 and "text/html" in ctype, host
        status, ctype, body = get(ep.port, "coingecko.test:80", "/api/coins")
        assert status == 200 and ctype == "application/json"
        coins = world.collection("crypto/coins", world.base_time)
        page = json.loads(body)  # the default API is paged: one request never holds a whole collection
        assert page["count"] == len(coins) > len(page["items"]) and page["next"].startswith("/api/coins?page=2&at=")
        assert page["items"] == sorted(coins, key=lambda c: c["id"])[:len(page["items"])]
        bulk = server.open_episode(world, SimClock(world.base_time, speed=0), api="bulk")
        try:
            assert json.loads(get(bulk.port, "coingecko.test", "/api/coins")[2])["items"] == coins
        finally:
            server.close_episode(bulk)
        status, _, body = get(ep.port, "example.com", "/")
        assert status == 404 and b"coingecko.test" in body  # says which hosts exist
        assert ep.log[-2:] == [("coingecko.test", "/api/coins"), ("example.com", "/")]  # the trace
    finally:
        server.close_episode(ep)


def test_main_port_needs_an_episode_key_by_header_or_path(server, world):
    ep = server.open_episode(world, SimClock(world.base_time, speed=0), own_port=False)
    try:
        assert ep.port is None
        status, _, body = get(server.port, "news.test", "/api/stories")
        assert status == 404 and b"X-Termgym-Episode" in body
        status, _, a = get(server.port, "news.test", "/api/stories", {"X-Termgym-Episode": ep.key})
        status2, _, b = get(server.port, "news.test", f"/_episode/{ep.key}/api/stories")
        assert status == status2 == 200 and a == b
    finally:
        server.close_episode(ep)


def test_episodes_are_isolated_and_follow_their_own_clocks(server, world):
    a = server.open_episode(world, SimClock(world.base_time, speed=0))
    b = server.open_episode(world, SimClock(world.base_time + DAY, speed=0))
    try:
        _, _, body_a = get(a.port, "coingecko.test", "/api/coins")
        _, _, body_b = get(b.port, "coingecko.test", "/api/coins")
        assert json.loads(body_a)["time"] + DAY == json.loads(body_b)["time"]
        assert json.loads(body_a)["items"] != json.loads(body_b)["items"]
        a.clock.advance(DAY)
        _, _, again = get(a.port, "coingecko.test", "/api/coins")
        assert json.loads(again)["items"] == json.loads(body_b)["items"]
    finally:
        server.close_episode(a)
        server.close_episode(b)
    # A closed episode's port refuses connections.
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", a.port)) != 0


def test_keep_alive_head_and_bad_requests(server, world):
    ep = server.open_episode(world, SimClock(world.base_time, speed=0))
    try:
        conn = http.client.HTTPConnection("127.0.0.1", ep.port, timeout=10)
        for _ in range(3):  # one connection, several requests
            assert get(ep.port, "books.test", "/", conn=conn)[0] == 200
        conn.request("HEAD", "/", headers={"Host": "books.test"})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.read() == b"" and int(resp.getheader("Content-Length")) > 0
        conn.request("POST", "/api/books", body=b"{}", headers={"Host": "books.test"})
        resp = conn.getresponse()
        assert resp.status == 405 and b"read-only" in resp.read()
        conn.close()
        with socket.create_connection(("127.0.0.1", ep.port), timeout=10) as s:
            s.sendall(b"NONSENSE\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 400")
        with socket.create_connection(("127.0.0.1", ep.port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.0\r\nHost: news.test\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):  # HTTP/1.0 without keep-alive: the server closes
                data += chunk
            assert data.startswith(b"HTTP/1.1 200") and b"Connection: close" in data
    finally:
        server.close_episode(ep)


def test_shared_server_is_one_per_process():
    assert shared_server() is shared_server()
    assert shared_server().running


_CLIENT = r"""
import http.client, json, sys, threading
ports, per_client = [int(p) for p in sys.argv[1].split(",")], int(sys.argv[2])
paths = json.loads(sys.argv[3])
statuses, errors, lock = {}, [], threading.Lock()

def hammer(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(per_client):
        host, path = paths[i % len(paths)]
        try:
            conn.request("GET", path, headers={"Host": host})
            resp = conn.getresponse()
            resp.read()
            with lock:
                statuses[resp.status] = statuses.get(resp.status, 0) + 1
        except Exception as exc:
            with lock:
                errors.append(repr(exc))
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.close()

threads = [threading.Thread(target=hammer, args=(p,)) for p in ports]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"statuses": statuses, "errors": errors[:5], "n_errors": len(errors)}))
"""


def test_survives_64_concurrent_episodes_hammering_it(server, capsys):
    """64 episodes (each its own world, clock and port), each hammered by a keep-alive client.

    The clients run in 4 separate processes (16 threads each) so that the measurement is of the
    server, not of client threads competing with it for the GIL.
    """
    # Real-time clocks (speed 1), as in training: a world recomputes its data once a simulated minute.
    # Episodes of one seed share a World, as LiveWebSuite arranges: 16 worlds behind 64 episodes.
    worlds = [World(1000 + i) for i in range(16)]
    episodes = [server.open_episode(worlds[i % 16], SimClock(worlds[i % 16].base_time)) for i in range(64)]
    paths = [["coingecko.test", "/"], ["coingecko.test", "/api/coins"], ["stooq.test", "/q/?s=x"],
             ["taostats.test", "/subnets?page=2"], ["news.test", "/"], ["books.test", "/api/books"],
             ["news.test", "/api/stories"], ["books.test", "/genre/poetry"]]
    per_client = 80
    # Warm the worlds' static data first so the measurement is of serving, not world generation.
    for ep in episodes:
        for site in ep.world.sites:
            ep.world.records(site, ep.clock.now())
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", _CLIENT, ",".join(str(ep.port) for ep in episodes[i::4]),
                               str(per_client), json.dumps(paths)], stdout=subprocess.PIPE, text=True)
             for i in range(4)]
    results = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    elapsed = time.perf_counter() - start
    for ep in episodes:
        server.close_episode(ep)
    total = 64 * per_client
    statuses: dict[str, int] = {}
    for r in results:
        assert r["n_errors"] == 0, r["errors"]
        for k, v in r["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    missing = 64 * (per_client // len(paths))  # "/q/?s=x" is a 404 by design
    assert statuses == {"200": total - missing, "404": missing}
    with capsys.disabled():
        print(f"\nliveweb server: {total} requests from 64 concurrent episodes in {elapsed:.2f}s "
              f"= {total / elapsed:.0f} requests/s")
    assert server.running and get(server.port, "x", "/")[0] == 404  # still serving afterwards
