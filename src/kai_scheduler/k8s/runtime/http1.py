"""`Http1Pool`: the API client's ordinary requests (every call but a watch) over plain HTTP/1.1 connections
kept alive, one request on a connection at a time.

Why not aiohttp for these: on issue #23's 10,000-pod live row the components make six writes a pod, and
aiohttp's per-request machinery (its request and response objects, payload and writer, timer handles,
cookie jar, URL building) cost the `run` process about 90 us of CPU a request against a local server,
this pool about 30 us: a request here is its head and body written in one go and the answer read by one
`asyncio.Protocol` as it arrives. Watches stay on aiohttp (a long stream each, nothing to gain), and so do
all requests when a proxy is configured (this pool speaks to the API server directly).

What the answers may be: a status line and headers, then a body of `Content-Length` bytes, a chunked one,
or (no length, not chunked) one that ends with the connection; 1xx answers are skipped. A connection goes
back to the pool unless the answer or HTTP/1.0 says it closes; one idle for `keepalive` seconds is
closed rather than used (servers close idle connections: Go's API server after its idle timeout).
Failures raise OSError (`ConnectionError` when the server closed the connection before answering) or
TimeoutError; a request on a kept connection that the server closed before answering anything is sent
once more on a new one when its method is idempotent (a server may close an idle connection just as it
is reused), as aiohttp does.

    pool = Http1Pool("https://10.0.0.1:6443", ssl_context, limit=100)
    status, body = await pool.request("GET", "/api/v1/nodes", {"Accept": "application/json"}, None, 10.0)
    await pool.close()
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
_NO_BODY_STATUSES = frozenset({204, 304})
_MAX_HEAD = 256 * 1024  # bytes of status line and headers before the answer is refused as malformed


class _Answer:
    """The answer being read: its head once complete, then its body."""

    __slots__ = ("body", "chunk_left", "chunked", "head_done", "keep_alive", "length", "status")

    def __init__(self) -> None:
        self.status = 0
        self.head_done = False
        self.length: int | None = None  # Content-Length, when given
        self.chunked = False
        self.chunk_left = -1  # bytes of the chunk and its CRLF to come; -1: a size line next, -2: trailers
        self.keep_alive = True
        self.body = bytearray()


class _Connection(asyncio.Protocol):
    """One kept-alive connection: the answer to the request written on it is read into `answered`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.answered: asyncio.Future[tuple[int, bytes, bool]] | None = None
        self.answer = _Answer()
        self.received = False  # a byte of the current answer came
        self.closed = False
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        answer = self.answer
        if answer.head_done and answer.length is None and not answer.chunked:
            self._done(bytes(answer.body))  # a body that ends with the connection
            return
        self._fail(ConnectionError(f"the server closed the connection{f': {exc}' if exc else ''}"))

    def data_received(self, data: bytes) -> None:
        if self.answered is None or self.answered.done():
            self.close()  # nothing was asked: the connection is out of step
            return
        self.received = True
        self.buffer += data
        try:
            self._read()
        except ValueError as error:
            self._fail(ConnectionError(f"malformed answer: {error}"))
            self.close()

    def eof_received(self) -> bool | None:
        return False  # the transport closes itself; `connection_lost` ends the answer

    def send(self, data: bytes) -> asyncio.Future[tuple[int, bytes, bool]]:
        """Write a request; the future gets (status, body, whether the connection may be kept)."""
        assert self.transport is not None
        self.answer = _Answer()
        self.received = False
        self.answered = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.answered

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # --- reading the answer ---

    def _read(self) -> None:
        answer = self.answer
        buffer = self.buffer
        while not answer.head_done:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > _MAX_HEAD:
                    raise ValueError("the head is too long")
                return
            self._head(bytes(buffer[:end]))
            del buffer[: end + 4]
            if 100 <= answer.status < 200:
                self.answer = answer = _Answer()  # an interim answer: the real one follows
        if answer.status in _NO_BODY_STATUSES:
            self._done(b"")
        elif answer.chunked:
            self._chunks()
        elif answer.length is not None:
            if len(buffer) >= answer.length:
                body = bytes(buffer[: answer.length])
                del buffer[: answer.length]
                self._done(body)
        else:
            answer.body += buffer  # to the end of the connection
            buffer.clear()

    def _head(self, head: bytes) -> None:
        answer = self.answer
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise ValueError(f"status line {lines[0][:80]!r}")
        answer.status = int(parts[1])
        answer.keep_alive = parts[0] != b"HTTP/1.0"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                answer.length = int(value)
            elif name == b"transfer-encoding":
                answer.chunked = b"chunked" in value.lower()
            elif name == b"connection":
                answer.keep_alive = value.strip().lower() != b"close"
        if answer.chunked:
            answer.length = None
        elif answer.length is None and answer.status not in _NO_BODY_STATUSES:
            answer.keep_alive = False  # its end is the connection's
        answer.head_done = True

    def _chunks(self) -> None:
        answer = self.answer
        buffer = self.buffer
        while True:
            if answer.chunk_left < 0:  # a size line next, or (-2) the trailer lines after the last chunk
                end = buffer.find(b"\r\n")
                if end < 0:
                    return
                line = bytes(buffer[:end])
                del buffer[: end + 2]
                if answer.chunk_left == -2:
                    if not line:  # the empty line that ends the answer
                        self._done(bytes(answer.body))
                        return
                    continue
                size = int(line.split(b";", 1)[0], 16)
                answer.chunk_left = size + 2 if size else -2
                continue
            if len(buffer) < answer.chunk_left:
                return
            answer.body += buffer[: answer.chunk_left - 2]
            del buffer[: answer.chunk_left]
            answer.chunk_left = -1

    def _done(self, body: bytes) -> None:
        answered = self.answered
        if answered is not None and not answered.done():
            answered.set_result((self.answer.status, body, self.answer.keep_alive and not self.closed))

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
        async with self._slots, asyncio.timeout(timeout):
            connection, reused = await self._connection()
            try:
                status, answer, keep = await self._exchange(connection, data)
            except ConnectionError:
                if not (reused and not connection.received and method in _IDEMPOTENT):
                    raise
                connection, _ = await self._connection(fresh=True)
                status, answer, keep = await self._exchange(connection, data)
            if keep and not self._closed:
                connection.idle_since = asyncio.get_running_loop().time()
                self._idle.append(connection)
            else:
                connection.close()
            return status, answer

    async def _exchange(self, connection: _Connection, data: bytes) -> tuple[int, bytes, bool]:
        try:
            return await connection.send(data)
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
            _Connection, self.host, self.port, ssl=self._ssl, server_hostname=server_hostname
        )
        return connection, False

    async def close(self) -> None:
        """Close the idle connections, and those in use once their answer is in."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


__all__ = ["Http1Pool"]
