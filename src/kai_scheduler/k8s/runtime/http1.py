"""`Http1Pool`: the API client's ordinary requests (every call but a watch) over plain HTTP/1.1 connections
kept alive, one request on a connection at a time.

Why not aiohttp for these: on issue #23's 10,000-pod live row the components make six writes a pod, and
aiohttp's per-request machinery (its request and response objects, payload and writer, timer handles,
cookie jar, URL building) cost the `run` process about 90 us of CPU a request against a local server,
this pool about 30 us: a request here is its head and body written in one go and the answer read by one
`asyncio.Protocol` as it arrives. Watches stay on aiohttp (a long stream each, nothing to gain), and so do
all requests when a proxy is configured (this pool speaks to the API server directly).

The answers are parsed by llhttp (Node.js's HTTP parser, through httptools, as uvicorn uses it), which
knows their forms and edge cases: a body of `Content-Length` bytes, a chunked one (extensions, trailers),
or (no length, not chunked) one that ends with the connection; 1xx answers are skipped. A connection goes
back to the pool when the parser says it may be kept alive; one idle for `keepalive` seconds is closed
rather than used (servers close idle connections: Go's API server after its idle timeout).
Failures raise OSError (`ConnectionError` when the server closed the connection before answering, or
answered something malformed: naming the server, the request and what was wrong) or TimeoutError; a
request on a kept connection that the server closed before answering anything is sent once more on a new
one when its method is idempotent (a server may close an idle connection just as it is reused), as
aiohttp does.

    pool = Http1Pool("https://10.0.0.1:6443", ssl_context, limit=100)
    status, body = await pool.request("GET", "/api/v1/nodes", {"Accept": "application/json"}, None, 10.0)
    await pool.close()
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

import httptools

_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
_MAX_HEAD = 256 * 1024  # bytes of status line and headers before the answer is refused as malformed


class _Connection(asyncio.Protocol):
    """One kept-alive connection to `server`: llhttp (through httptools) reads the answer to the request
    written on it into `answered`; the parser's callbacks are the `on_*` methods."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.answered: asyncio.Future[tuple[int, bytes, bool]] | None = None
        self.request = ""  # the request being answered, for errors: "GET /api/v1/nodes"
        self.received = False  # a byte of the current answer came
        self.head_size = 0  # bytes received before the head was complete
        self.head_done = False
        self.delimited = False  # the answer gave a length or chunks (else its body ends with the connection)
        self.body = bytearray()
        self.closed = False
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.head_done and not self.delimited:  # a body that ends with the connection
            self._done(self.parser.get_status_code(), keep=False)
        self._fail(ConnectionError(f"the server closed the connection{f': {exc}' if exc else ''}"))

    def data_received(self, data: bytes) -> None:
        if self.answered is None or self.answered.done():
            self.close()  # nothing was asked: the connection is out of step
            return
        self.received = True
        if not self.head_done:
            self.head_size += len(data)
            if self.head_size > _MAX_HEAD:  # llhttp sets no bound of its own
                self._malformed("the head is too long")
                return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # a 101 answer: this client never asks to switch protocols
            self._malformed("it switches protocols")
        except httptools.HttpParserError as error:
            self._malformed(str(error))

    def _malformed(self, reason: str) -> None:
        self._fail(ConnectionError(f"malformed answer from {self.server} to {self.request}: {reason}"))
        self.close()  # the parser cannot go on: neither can the connection

    def eof_received(self) -> bool | None:
        return False  # the transport closes itself; `connection_lost` ends the answer

    def send(self, data: bytes, request: str) -> asyncio.Future[tuple[int, bytes, bool]]:
        """Write a request; the future gets (status, body, whether the connection may be kept)."""
        assert self.transport is not None
        self.request = request
        self.received = False
        self.head_size = 0
        self.answered = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.answered

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # --- the parser's callbacks ---

    def on_message_begin(self) -> None:
        if self.answered is None or self.answered.done():
            raise ValueError("an answer nothing asked for")  # the parser fails; the connection closes
        self.head_done = self.delimited = False
        self.body = bytearray()

    def on_header(self, name: bytes, value: bytes) -> None:
        # httptools does not say whether a body ends with the connection (llhttp's `finish` is not bound)
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self.delimited = True

    def on_headers_complete(self) -> None:
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.head_done = False  # a 1xx's head: a close before the real answer is no body's end
        status = self.parser.get_status_code()
        if status >= 200:  # not an interim answer (100 Continue): the real one follows those
            self._done(status, keep=self.parser.should_keep_alive() and not self.closed)

    def _done(self, status: int, *, keep: bool) -> None:
        answered = self.answered
        if answered is not None and not answered.done():
            answered.set_result((status, bytes(self.body), keep))

    def _fail(self, error: Exception) -> None:
        answered = self.answered
        if answered is not None and not answered.done():
            answered.set_exception(error)


class Http1Pool:
    """Kept-alive HTTP/1.1 connections to the server of `base_url` (`http:` or `https:` with `ssl`), at
    most `limit` at once."""

    def __init__(
        self, base_url: str, ssl_context: ssl.SSLContext | None, *, limit: int = 100, keepalive: float = 15.0
    ) -> None:
        parts = urlsplit(base_url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")  # a server behind a path (a proxy's cluster route)
        self._host_header = parts.netloc.rpartition("@")[2]
        self.url = f"{parts.scheme}://{self._host_header}"  # for errors
        self._ssl: ssl.SSLContext | None = (
            (ssl_context or ssl.create_default_context()) if self.https else None
        )
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(limit)
        self.keepalive = keepalive
        self.loop = asyncio.get_running_loop()  # its connections' (made inside the loop, as aiohttp's)
        self._closed = False

    async def request(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None, timeout: float
    ) -> tuple[int, bytes]:
        """(status, body) of `method` on `target` (a path with its query)."""
        lines = [f"{method} {self.prefix}{target} HTTP/1.1\r\nHost: {self._host_header}\r\n"]
        lines += [f"{name}: {value}\r\n" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}\r\n")
        data = "".join(lines).encode("latin-1") + b"\r\n" + (body or b"")
        request = f"{method} {self.prefix}{target}"
        async with self._slots, asyncio.timeout(timeout):
            connection, reused = await self._connection()
            try:
                status, answer, keep = await self._exchange(connection, data, request)
            except ConnectionError:
                if not (reused and not connection.received and method in _IDEMPOTENT):
                    raise
                connection, _ = await self._connection(fresh=True)
                status, answer, keep = await self._exchange(connection, data, request)
            if keep and not self._closed:
                connection.idle_since = asyncio.get_running_loop().time()
                self._idle.append(connection)
            else:
                connection.close()
            return status, answer

    async def _exchange(self, connection: _Connection, data: bytes, request: str) -> tuple[int, bytes, bool]:
        try:
            return await connection.send(data, request)
        except BaseException:
            connection.close()  # out of step (cancelled, timed out, cut): never reused
            raise

    async def _connection(self, *, fresh: bool = False) -> tuple[_Connection, bool]:
        """An idle connection kept alive (and whether it is one), else a new one."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._idle and not fresh:
            connection = self._idle.pop()
            if not connection.closed and now - connection.idle_since < self.keepalive:
                return connection, True
            connection.close()
        server_hostname = self.host if self._ssl is not None else None
        _, connection = await loop.create_connection(
            lambda: _Connection(self.url),
            self.host,
            self.port,
            ssl=self._ssl,
            server_hostname=server_hostname,
        )
        return connection, False

    async def close(self) -> None:
        """Close the idle connections, and those in use once their answer is in."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


__all__ = ["Http1Pool"]
