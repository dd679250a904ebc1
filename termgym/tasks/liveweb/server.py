"""The world server: every simulated site, for every live episode, over real HTTP on loopback.

One asyncio loop on a daemon thread serves all episodes of the process. Sites are told apart by
the ``Host`` header. Episodes are told apart in one of two ways:

* by port — :meth:`WorldServer.open_episode` opens a listening socket of the episode's own on
  ``127.0.0.1``; everything that arrives there is that episode's. This is what sandboxes use: the
  port forwarder relays ``http://coingecko.test/`` inside the sandbox to that port, so the agent
  needs no key and cannot reach another episode.
* on the main port — by an ``X-Termgym-Episode: <key>`` header or a ``/_episode/<key>/`` path
  prefix (for host-side tools and tests), or the server's default episode if it has one.

The HTTP layer is a small HTTP/1.1 implementation (GET and HEAD, keep-alive, bounded request
sizes) so that one thread handles many concurrent connections without a thread per client.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qsl, urlsplit

from termgym.sandbox.forwarding import start_loop_thread
from termgym.tasks.liveweb.sites.base import API_MODES, API_QUOTA, DEFAULT_API, Response
from termgym.tasks.liveweb.world import SimClock, World

EPISODE_HEADER = "x-termgym-episode"
_MAX_LINE = 8192
_MAX_HEADERS = 100
_MAX_BODY = 1 << 20
_IDLE_TIMEOUT = 30.0
LOG_SIZE = 1000


@dataclass
class Episode:
    """One episode's view of the world: its world, its clock and (when opened) its own port."""

    key: str
    world: World
    clock: SimClock
    port: int | None = None
    requests: int = 0
    api: str = DEFAULT_API  # the JSON API mode (sites.base.API_MODES)
    api_requests: int = 0
    #: ``(host, path?query)`` of every request, oldest first (the last :data:`LOG_SIZE`).
    log: list[tuple[str, str]] = field(default_factory=list)
    _server: asyncio.base_events.Server | None = field(default=None, repr=False)


class WorldServer:
    """Serves LIVEWEB worlds over HTTP on loopback (see the module docstring).

    Use :func:`shared_server` to get the process-wide instance; construct one directly for a
    fixed port (``termgym liveweb serve``) or a default episode.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, default: Episode | None = None) -> None:
        self.host = host
        self.port = port
        self.default = default
        self.episodes: dict[str, Episode] = {}
        self.requests = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._main: asyncio.base_events.Server | None = None
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._loop is not None and self._thread is not None and self._thread.is_alive()

    def start(self) -> WorldServer:
        """Start the loop thread and the main listener (idempotent); returns ``self``."""
        with self._lock:
            if self.running:
                return self
            self._loop, self._thread = start_loop_thread("termgym-liveweb")
            self._main = self._call(self._listen(None, self.port))
            self.port = self._main.sockets[0].getsockname()[1]
            return self

    def stop(self) -> None:
        """Close every listener and stop the loop thread."""
        with self._lock:
            if not self.running:
                return
            loop = self._loop
            assert loop is not None

            async def shutdown() -> None:
                for server in [self._main, *(e._server for e in self.episodes.values())]:
                    if server is not None:
                        server.close()

            self._call(shutdown())
            loop.call_soon_threadsafe(loop.stop)
            assert self._thread is not None
            self._thread.join(timeout=10)
            self._loop = None
            self.episodes.clear()

    def _call(self, coro, timeout: float = 30.0):
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # -- episodes ---------------------------------------------------------------------------------

    def open_episode(self, world: World, clock: SimClock, *, own_port: bool = True, api: str = DEFAULT_API) -> Episode:
        """Register an episode; with ``own_port`` it also gets a listening port of its own.

        ``api`` is the JSON API mode of its sites (:data:`~termgym.tasks.liveweb.sites.base.API_MODES`).
        """
        if api not in API_MODES:
            raise ValueError(f"API mode must be one of {', '.join(API_MODES)}, got {api!r}")
        self.start()
        episode = Episode(key=secrets.token_hex(12), world=world, clock=clock, api=api)
        if own_port:
            episode._server = self._call(self._listen(episode, 0))
            episode.port = episode._server.sockets[0].getsockname()[1]
        self.episodes[episode.key] = episode
        return episode

    def close_episode(self, episode: Episode | str) -> None:
        """Forget an episode and close its port (idempotent)."""
        key = episode if isinstance(episode, str) else episode.key
        ep = self.episodes.pop(key, None)
        if ep is not None and ep._server is not None and self.running:
            server, ep._server = ep._server, None

            async def close() -> None:
                server.close()

            with contextlib.suppress(Exception):
                self._call(close())

    async def _listen(self, episode: Episode | None, port: int) -> asyncio.base_events.Server:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._connection(reader, writer, episode)

        return await asyncio.start_server(handle, self.host, port, backlog=1024, limit=_MAX_LINE)

    # -- HTTP ---------------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          episode: Episode | None) -> None:
        try:
            while True:
                try:
                    line = await asyncio.wait_for(reader.readline(), _IDLE_TIMEOUT)
                except (asyncio.TimeoutError, asyncio.LimitOverrunError, ValueError):
                    break
                if not line:
                    break
                if line in (b"\r\n", b"\n"):
                    continue  # tolerated between pipelined requests
                parts = line.decode("latin-1").split()
                if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                    await self._send(writer, _error(400, "malformed request line"), "GET", keep_alive=False)
                    break
                method, target, version = parts
                headers: dict[str, str] = {}
                while True:
                    hline = await reader.readline()
                    if hline in (b"\r\n", b"\n", b""):
                        break
                    if len(headers) >= _MAX_HEADERS:
                        await self._send(writer, _error(431, "too many headers"), method, keep_alive=False)
                        return
                    name, _, value = hline.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0") or 0)
                if length > _MAX_BODY:
                    await self._send(writer, _error(413, "request body too large"), method, keep_alive=False)
                    break
                if length:
                    await reader.readexactly(length)
                conn = headers.get("connection", "").lower()
                keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
                response = self.respond(method, target, headers, episode)
                await self._send(writer, response, method, keep_alive)
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _send(self, writer: asyncio.StreamWriter, response: Response, method: str, keep_alive: bool) -> None:
        reason = HTTPStatus(response.status).phrase if response.status in HTTPStatus._value2member_map_ else ""
        head = [f"HTTP/1.1 {response.status} {reason}", f"Content-Type: {response.content_type}",
                f"Content-Length: {len(response.body)}", "Cache-Control: no-store",
                f"Connection: {'keep-alive' if keep_alive else 'close'}"]
        head += [f"{k}: {v}" for k, v in response.headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        if method != "HEAD":
            writer.write(response.body)
        await writer.drain()

    def respond(self, method: str, target: str, headers: dict[str, str], episode: Episode | None) -> Response:
        """The response to one request (also usable without sockets, e.g. from tests)."""
        self.requests += 1
        if method not in ("GET", "HEAD"):
            return _error(405, f"{method} is not supported: the simulated sites are read-only (use GET)")
        url = urlsplit(target)
        path = url.path or "/"
        if episode is None:
            key = headers.get(EPISODE_HEADER)
            if path.startswith("/_episode/"):
                key, _, rest = path[len("/_episode/"):].partition("/")
                path = "/" + rest
            episode = self.episodes.get(key) if key else self.default
            if episode is None:
                return _error(404, "unknown or missing episode: send X-Termgym-Episode or use /_episode/<key>/")
        episode.requests += 1
        host = headers.get("host", "").rsplit(":", 1)[0].lower() if headers.get("host", "").count(":") <= 1 \
            else headers.get("host", "").lower()
        episode.log.append((host, path + (f"?{url.query}" if url.query else "")))
        if len(episode.log) > LOG_SIZE:
            del episode.log[: len(episode.log) - LOG_SIZE]
        site = episode.world.site_by_host(host)
        if site is None:
            known = ", ".join(sorted(s.host for s in episode.world.sites.values()))
            return _error(404, f"no site at host {host or '(none)'!r}; sites: {known}")
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        if path == "/api" or path.startswith("/api/"):
            episode.api_requests += 1
            if episode.api == "limited" and episode.api_requests > API_QUOTA:
                return Response(429, (f'{{"error":"rate limited: the free API allows {API_QUOTA} requests per '
                                      'session; the web pages have no limit"}').encode(), "application/json",
                                {"Retry-After": "3600"})
        try:
            return site.handle(episode.world, episode.clock.now(), path, query, api=episode.api)
        except Exception as exc:  # a page bug must never take the server down
            return _error(500, f"internal error rendering {host}{path}: {type(exc).__name__}: {exc}")


def _error(status: int, message: str) -> Response:
    return Response(status, (message + "\n").encode(), "text/plain; charset=utf-8")


_shared: WorldServer | None = None
_shared_lock = threading.Lock()


def shared_server() -> WorldServer:
    """The process-wide world server, started on first use."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running:
            _shared = WorldServer().start()
        return _shared
