"""The API client's HTTP/1.1 pool against a scripted server: how each form of answer ends (a length, chunks,
the connection's end), when a connection is kept and reused, and what a failure raises."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from kai_scheduler.k8s.runtime.http1 import Http1Pool

T = TypeVar("T")
CLOSE = b""  # as an answer: close the connection without answering
SILENT = None  # as an answer: never answer


def answer(status: int, body: bytes, *headers: str) -> bytes:
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{h}\r\n" for h in headers)
    return head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body


class Scripted:
    """Answers each request with the next of `answers` (bytes to write, CLOSE or SILENT); records the
    requests, and by which connection (counted from 1) they came."""

    def __init__(self, answers: list[bytes | None]) -> None:
        self.answers = answers
        self.requests: list[tuple[int, bytes]] = []
        self.connections = 0
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Scripted:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection = self.connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length)
                self.requests.append((connection, head.split(b"\r\n")[0] + b" " + body))
                reply = self.answers.pop(0)
                if reply is SILENT:
                    await asyncio.sleep(3600)
                if not reply:
                    break
                writer.write(reply)
                await writer.drain()
                ends = b"Content-Length" in reply or b"chunked" in reply
                if b"Connection: close" in reply or not ends:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def run(make: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(make(), 30))


def test_answers_by_length_come_back_on_one_kept_connection() -> None:
    async def body() -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
        async with Scripted([answer(201, b'{"a":1}'), answer(404, b"gone")]) as server:
            pool = Http1Pool(server.url, None)
            got = [
                await pool.request("POST", "/x?fieldManager=k", {"Accept": "application/json"}, b"{}", 5),
                await pool.request("GET", "/y", {}, None, 5),
            ]
            await pool.close()
            return got, server.requests

    got, requests = run(body)
    assert got == [(201, b'{"a":1}'), (404, b"gone")]
    assert requests == [(1, b"POST /x?fieldManager=k HTTP/1.1 {}"), (1, b"GET /y HTTP/1.1 ")]


def test_a_chunked_answer_with_trailers_and_an_interim_one_before_it() -> None:
    chunked = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )

    async def body() -> tuple[list[tuple[int, bytes]], int]:
        async with Scripted([chunked, answer(200, b"again")]) as server:
            pool = Http1Pool(server.url, None)
            got = [await pool.request("GET", "/c", {}, None, 5) for _ in range(2)]
            await pool.close()
            return got, server.connections

    got, connections = run(body)
    assert got == [(200, b"hello world"), (200, b"again")]
    assert connections == 1  # the chunked answer's end is known: the connection is kept


def test_an_answer_without_a_length_ends_with_its_connection_and_so_does_a_closing_one() -> None:
    async def body() -> tuple[list[tuple[int, bytes]], int]:
        answers: list[bytes | None] = [
            b"HTTP/1.1 200 OK\r\n\r\nto the end",
            answer(200, b"closing", "Connection: close"),
            answer(200, b"third"),
        ]
        async with Scripted(answers) as server:
            pool = Http1Pool(server.url, None)
            got = [await pool.request("GET", "/e", {}, None, 5) for _ in range(3)]
            await pool.close()
            return got, server.connections

    got, connections = run(body)
    assert got == [(200, b"to the end"), (200, b"closing"), (200, b"third")]
    assert connections == 3


@pytest.mark.parametrize(
    ("method", "sent_again"), [("GET", True), ("PUT", True), ("POST", False), ("PATCH", False)]
)
def test_a_kept_connection_closed_unanswered_sends_an_idempotent_request_again(
    method: str, sent_again: bool
) -> None:
    async def body() -> tuple[tuple[int, bytes] | str, list[tuple[int, bytes]]]:
        async with Scripted([answer(200, b"first"), CLOSE, answer(200, b"second")]) as server:
            pool = Http1Pool(server.url, None)
            await pool.request("GET", "/k", {}, None, 5)
            try:
                got: tuple[int, bytes] | str = await pool.request(method, "/k", {}, b"", 5)
            except ConnectionError as error:
                got = f"ConnectionError: {error}"
            await pool.close()
            return got, server.requests

    got, requests = run(body)
    if sent_again:
        assert got == (200, b"second")
        assert [connection for connection, _ in requests] == [1, 1, 2]
    else:  # it may have been carried out: the caller decides
        assert got == "ConnectionError: the server closed the connection"
        assert len(requests) == 2


def test_a_timed_out_request_s_connection_is_not_used_again() -> None:
    async def body() -> tuple[str, tuple[int, bytes], int]:
        async with Scripted([SILENT, answer(200, b"fresh")]) as server:
            pool = Http1Pool(server.url, None)
            with pytest.raises(TimeoutError):
                await pool.request("GET", "/slow", {}, None, 0.2)
            got = await pool.request("GET", "/next", {}, None, 5)
            await pool.close()
            return "timed out", got, server.connections

    _, got, connections = run(body)
    assert (got, connections) == ((200, b"fresh"), 2)


def test_a_connection_idle_past_keepalive_is_not_reused() -> None:
    async def body() -> int:
        async with Scripted([answer(200, b"a"), answer(200, b"b")]) as server:
            pool = Http1Pool(server.url, None, keepalive=0.0)
            for _ in range(2):
                await pool.request("GET", "/i", {}, None, 5)
            await pool.close()
            return server.connections

    assert run(body) == 2


def test_a_refused_connection_raises_an_os_error() -> None:
    async def body() -> None:
        async with Scripted([]) as server:
            url = server.url
        pool = Http1Pool(url, None)  # nothing listens there any more
        await pool.request("GET", "/", {}, None, 5)

    with pytest.raises(OSError):
        run(body)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", "Invalid status code"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "Invalid character in chunk size"),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n",
            "switches protocols",
        ),
    ],
)
def test_a_malformed_answer_names_the_server_and_the_request_and_its_connection_is_dropped(
    reply: bytes, reason: str
) -> None:
    async def body() -> tuple[str, str, tuple[int, bytes], int]:
        async with Scripted([reply, answer(200, b"fresh")]) as server:
            pool = Http1Pool(server.url, None)
            with pytest.raises(ConnectionError) as failure:
                await pool.request("GET", "/api/v1/nodes?limit=5", {}, None, 5)
            got = await pool.request("GET", "/next", {}, None, 5)
            await pool.close()
            return str(failure.value), server.url, got, server.connections

    message, url, got, connections = run(body)
    assert message.startswith(f"malformed answer from {url} to GET /api/v1/nodes?limit=5: ")
    assert reason in message and "\n" not in message
    assert (got, connections) == ((200, b"fresh"), 2)
