"""The fake API server's HTTP/1.1 side: one asyncio event loop (uvloop's), in a thread of its own, serves
every connection; httptools (llhttp, Node.js's parser) reads the requests; `exchange.ApiRequests` answers
them.

Why one loop: the server it replaces ran a thread per connection (`http.server`), and at the live
benchmark's pace (issue #23: ~7 writes a pod, each fanned out to several watches) every request and
every watch event woke a thread that then waited for the GIL: 20-30 context switches a pod, a sixth of
the server's CPU in the kernel. Here a request is read, handled and answered in the loop's thread, and a
commit queues its events for each watch stream, which the loop writes out once per pass however many
commits came in it. A request that may wait (`ApiRequests.blocking`: an admission webhook's call, a
resourceVersion the store has not reached) is handled on a worker thread instead, so that waiting stops
nothing else; the connection's next request waits for it, as HTTP/1.1 orders answers.

A head that is none is refused as Go's server (the API server's) refuses it, and the connection closed:
400 for what llhttp cannot parse (a folded header line among it: RFC 9112 section 5.2 lets a server
refuse it), 505 for HTTP/2 and later, 431 for a header field longer than 64 KiB or more than 100 of them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import email.utils
import functools
import http
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import cast

import httptools
import uvloop

from .exchange import END, Answer, ApiRequests, Request, WatchStream
from .request_head import MAX_FIELDS, MAX_LINE, HeaderFields

WORKERS = 8  # requests that may wait, handled at once
BACKLOG = 128
LINGER = 0.5  # seconds a refused request's connection is read from before it closes (Go's server's)


class LoopServer:
    """`api` served on `host`:`port` (`port` 0: an ephemeral one, read back from `port`) over HTTP, or
    HTTPS with `tls`, until `stop`."""

    def __init__(self, api: ApiRequests, host: str, port: int, tls: ssl.SSLContext | None) -> None:
        self.api = api
        # uvloop (libuv's loop, in C): a quarter less of the server's CPU than asyncio's own for creates
        # that go out to watches, its system time halved.
        self.loop = uvloop.new_event_loop()
        self.thread_id: int | None = None  # the loop's thread, once it runs
        self.connections: set[_Connection] = set()
        self.workers = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="fakeapi-work")
        try:
            self._server = cast(
                asyncio.Server,
                self.loop.run_until_complete(
                    self.loop.create_server(
                        lambda: _Connection(self), host, port, ssl=tls, backlog=BACKLOG, reuse_address=True
                    )
                ),
            )
        except BaseException:
            self.loop.close()
            self.workers.shutdown()
            raise
        self.port: int = self._server.sockets[0].getsockname()[1]
        self._thread = threading.Thread(target=self._run, name="fakeapi-serve", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.thread_id = threading.get_ident()
        try:
            self.loop.run_forever()
        finally:
            # One more pass: the connections cut by `_shutdown` end (their watches close).
            self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.close()

    def stop(self, timeout: float) -> None:
        """Stop listening and cut every connection (open watches end abruptly)."""
        with contextlib.suppress(RuntimeError):  # the loop is closed already
            self.loop.call_soon_threadsafe(self._shutdown)
        self._thread.join(timeout)
        self.workers.shutdown(wait=False, cancel_futures=True)

    def _shutdown(self) -> None:
        self._server.close()
        for connection in list(self.connections):
            connection.cut()
        self.loop.stop()

    def call_soon(self, callback: Callable[[], None]) -> None:
        """Run `callback` in the loop's thread, called from any thread."""
        if threading.get_ident() == self.thread_id:
            self.loop.call_soon(callback)
            return
        with contextlib.suppress(RuntimeError):  # the server stopped
            self.loop.call_soon_threadsafe(callback)


class _Refused(Exception):
    """A head that is none: answered `code` and the connection closed."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Connection(asyncio.Protocol):
    """One client connection: its requests parsed as they arrive and answered in order; after a watch's
    answer, nothing but the watch's events."""

    def __init__(self, server: LoopServer) -> None:
        self._server = server
        self._loop = server.loop
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiting: deque[tuple[Request, bool] | _Refused] = deque()  # requests and keep-alive
        self._busy = False  # an answer is worked out elsewhere or waited for, or a watch streams
        self._closed = False
        self._lingering = False  # refused: what the client still sends is read and thrown away
        self._stream: WatchStream | None = None
        self._flush_due = False
        self._timers: list[asyncio.TimerHandle] = []
        # The request being read.
        self._url: list[bytes] = []
        self._fields: list[tuple[str, str]] = []
        self._body: list[bytes] = []
        self._refused: _Refused | None = None

    # ------------------------------------------------------------------------------------------- events

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's are not its subclasses
        self._server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._server.connections.discard(self)
        for timer in self._timers:
            timer.cancel()
        if self._stream is not None:
            self._stream.close()

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # What follows the head is another protocol's: answer the request, then close.
            self._stop_reading()
            if self._waiting and not isinstance(self._waiting[-1], _Refused):
                request, _ = self._waiting.pop()  # type: ignore[misc]
                self._waiting.append((request, False))
        except httptools.HttpParserError as error:
            self._stop_reading()
            refused = self._refused or _Refused(400, str(error))
            self._waiting.append(refused)
        self._serve()

    def _stop_reading(self) -> None:
        assert self._transport is not None
        with contextlib.suppress(RuntimeError):
            self._transport.pause_reading()

    def cut(self) -> None:
        """Drop the connection now, whatever is left unsent (the server stops)."""
        if self._transport is not None:
            self._transport.abort()

    # ----------------------------------------------------------------------------- httptools callbacks

    def on_message_begin(self) -> None:
        self._url, self._fields, self._body = [], [], []

    def on_url(self, url: bytes) -> None:
        self._url.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > MAX_LINE:
            self._refused = _Refused(431, "Line too long")
        elif len(self._fields) == MAX_FIELDS:
            self._refused = _Refused(431, "Too many headers")
        if self._refused is not None:
            raise self._refused
        self._fields.append((name.decode("latin-1"), value.decode("latin-1").strip(" \t")))

    def on_headers_complete(self) -> None:
        version = self._parser.get_http_version()
        if not version.startswith("1."):
            code = 400 if version < "1." else 505
            self._refused = _Refused(code, f"Invalid HTTP version ({version})")
            raise self._refused
        expect = next((v for n, v in self._fields if n.lower() == "expect"), "")
        if version == "1.1" and expect.lower() == "100-continue" and not self._busy and not self._waiting:
            assert self._transport is not None
            self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        target = b"".join(self._url).decode("latin-1")
        if target.startswith("//"):
            target = "/" + target.lstrip("/")
        method = self._parser.get_method().decode("latin-1")
        request = Request(method, target, HeaderFields(self._fields), b"".join(self._body))
        self._waiting.append((request, self._parser.should_keep_alive()))

    # ---------------------------------------------------------------------------------------- answering

    def _serve(self) -> None:
        """Answer the requests read, in order, until one has to be waited for."""
        api = self._server.api
        while self._waiting and not self._busy and not self._closed:
            item = self._waiting.popleft()
            if isinstance(item, _Refused):
                self._refuse(item)
                return
            request, keep_alive = item
            if api.blocking(request):
                self._busy = True
                future = self._server.workers.submit(api.handle, request)
                future.add_done_callback(functools.partial(self._from_worker, keep_alive))
                return
            self._reply(api.handle(request), keep_alive)

    def _from_worker(self, keep_alive: bool, future: concurrent.futures.Future[Answer | WatchStream]) -> None:
        if not future.cancelled():
            self._server.call_soon(functools.partial(self._answered, keep_alive, future))

    def _answered(self, keep_alive: bool, future: concurrent.futures.Future[Answer | WatchStream]) -> None:
        result = future.result()
        self._busy = False
        if self._closed:
            if isinstance(result, WatchStream):
                result.close()
            return
        self._reply(result, keep_alive)
        self._serve()

    def _reply(self, result: Answer | WatchStream, keep_alive: bool) -> None:
        if isinstance(result, WatchStream):
            self._start_stream(result)
            return
        if result.delay > 0:
            self._busy = True
            self._timers.append(self._loop.call_later(result.delay, self._delayed, result, keep_alive))
            return
        assert self._transport is not None
        if result.cut:
            self._closed = True
            self._transport.close()  # what was answered before still goes out
            return
        head = _head(result.status, result.headers, len(result.body), keep_alive)
        self._transport.write(head + result.body)
        if not keep_alive:
            self._closed = True
            self._transport.close()

    def _delayed(self, answer: Answer, keep_alive: bool) -> None:
        self._busy = False
        if not self._closed:
            self._reply(replace(answer, delay=0.0), keep_alive)
            self._serve()

    def _refuse(self, refused: _Refused) -> None:
        phrase = _reason(refused.code)
        text = f"{refused.code} {phrase}: {refused.message}".encode()
        fields = [("Content-Type", "text/plain; charset=utf-8")]
        transport = self._transport
        assert transport is not None
        transport.write(_head(refused.code, fields, len(text), False) + text)
        # Closed with the rest of the client's request unread, the connection would be reset, the answer
        # perhaps lost with it: as Go's server, end the sending side and read on for a while first.
        self._closed = self._lingering = True
        if transport.can_write_eof():
            transport.write_eof()
        with contextlib.suppress(RuntimeError):
            transport.resume_reading()
        self._timers.append(self._loop.call_later(LINGER, transport.close))

    # -------------------------------------------------------------------------------------------- watch

    def _start_stream(self, stream: WatchStream) -> None:
        """Answer a watch: a chunked body of JSON lines, an event a chunk, until the watch ends."""
        assert self._transport is not None
        self._busy = True
        self._stream = stream
        # A stream ends with the connection: said up front, so that a client does not put the connection
        # back in its pool after the last chunk and send its next request into a socket being closed.
        head = _head(200, _STREAM_FIELDS, None, False)
        self._transport.write(head + _chunks(stream.first))
        if stream.ended is not None:
            self._end_stream(stream.ended)
            return
        stream.on_event(self._notify)
        if stream.bookmark_interval:
            self._timers.append(self._loop.call_later(stream.bookmark_interval, self._bookmark))
        if stream.timeout:
            self._timers.append(self._loop.call_later(stream.timeout, self._time_out))

    def _notify(self) -> None:
        """The watch has events (called from whichever thread committed them): write them out in the
        loop's next pass, with any others committed until then."""
        if not self._flush_due:
            self._flush_due = True
            self._server.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        stream = self._stream
        if stream is None or self._closed:
            return
        lines = stream.take()
        assert self._transport is not None
        if lines:
            self._transport.write(_chunks(lines))
        if stream.ended is not None:
            self._end_stream(stream.ended)

    def _bookmark(self) -> None:
        stream = self._stream
        self._flush()  # the events before it first: a bookmark says the client has them all
        if stream is None or self._closed or stream.bookmark_interval is None:
            return
        line = stream.bookmark()
        if line is not None:
            assert self._transport is not None
            self._transport.write(_chunks([line]))
        self._timers.append(self._loop.call_later(stream.bookmark_interval, self._bookmark))

    def _time_out(self) -> None:
        self._flush()
        if self._stream is not None and not self._closed:
            self._end_stream(END)

    def _end_stream(self, how: str) -> None:
        """`END`: the chunked body's end; else cut after what came before."""
        assert self._transport is not None and self._stream is not None
        if how == END:
            self._transport.write(b"0\r\n\r\n")
        self._closed = True
        self._transport.close()
        self._stream.close()


_STREAM_FIELDS = [
    ("Content-Type", "application/json"),
    ("Transfer-Encoding", "chunked"),
    ("Cache-Control", "no-cache, private"),
]


def _head(status: int, fields: list[tuple[str, str]], length: int | None, keep_alive: bool) -> bytes:
    """A response's status line and header fields, with the date, the length (None: a chunked body
    says its own) and `Connection: close` when the connection ends after it."""
    lines = [f"HTTP/1.1 {status} {_reason(status)}\r\nDate: {_http_date(int(time.time()))}\r\n"]
    lines.extend(f"{name}: {value}\r\n" for name, value in fields)
    if length is not None:
        lines.append(f"Content-Length: {length}\r\n")
    if not keep_alive:
        lines.append("Connection: close\r\n")
    lines.append("\r\n")
    # A value is sent as the bytes of its text, as Go's server sends a string.
    return "".join(lines).encode()


def _chunks(lines: list[bytes]) -> bytes:
    """Each line a chunk of a chunked body."""
    return b"".join(b"%x\r\n%b\r\n" % (len(line), line) for line in lines)


@functools.cache
def _reason(code: int) -> str:
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return ""


@functools.lru_cache(maxsize=4)
def _http_date(second: int) -> str:
    return email.utils.formatdate(second, usegmt=True)


__all__ = ["LoopServer"]
