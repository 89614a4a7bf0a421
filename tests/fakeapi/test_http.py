"""The fake API server's HTTP side (`http_loop.py`): what a client sends is read as HTTP/1.1 means it
(field names in any case, bodies by length or in chunks, requests sent back to back answered in order,
`Expect: 100-continue`), a head that is none is refused with the code the real API server gives and the
connection closed, and a request that waits stops no other."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

from kai_fakeapi import FakeApiServer
from kai_fakeapi.request_head import HeaderFields

READ = b"GET /api/v1/namespaces/team HTTP/1.1\r\nHost: x\r\n\r\n"


def _connect(server: FakeApiServer) -> socket.socket:
    parts = urlsplit(server.url)
    return socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=10)


def _read_answer(reader: Any) -> tuple[int, bytes] | None:
    status_line = reader.readline()
    if not status_line:
        return None
    length = 0
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return int(status_line.split()[1]), reader.read(length)


def exchange(server: FakeApiServer, *requests: bytes, together: bool = False) -> list[tuple[int, bytes]]:
    """Send `requests` on one connection, each after the answer before (`together`: all at once); the
    (status, body) of each answer read."""
    answers = []
    with _connect(server) as sock:
        reader = sock.makefile("rb")
        if together:
            sock.sendall(b"".join(requests))
        for request in requests:
            if not together:
                sock.sendall(request)
            answer = _read_answer(reader)
            if answer is None:
                break
            answers.append(answer)
    return answers


def _namespace(name: str) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).encode()


def _create(body: bytes, fields: bytes = b"") -> bytes:
    return (
        b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + fields
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


def test_fields_are_read_with_any_case_and_surrounding_spaces_on_a_kept_connection(
    server: FakeApiServer,
) -> None:
    body = _namespace("team")
    create = (
        b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\ncontent-TYPE:   application/json  \r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    (created, _), (found, answer) = exchange(server, create, READ)  # one connection: kept alive
    assert (created, found) == (201, 200)
    assert json.loads(answer)["metadata"]["name"] == "team"


def test_a_body_in_chunks_and_requests_sent_together_are_answered_in_order(server: FakeApiServer) -> None:
    body = _namespace("team")
    chunked = (
        b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        + b"%x;ext=1\r\n%b\r\n" % (10, body[:10])
        + b"%x\r\n%b\r\n" % (len(body) - 10, body[10:])
        + b"0\r\n\r\n"
    )
    again = _create(_namespace("team"))
    answers = exchange(server, chunked, READ, again, together=True)
    assert [status for status, _ in answers] == [201, 200, 409]
    assert json.loads(answers[1][1])["metadata"]["name"] == "team"


def test_a_client_that_expects_100_continue_is_told_to_send_its_body(server: FakeApiServer) -> None:
    body = _namespace("team")
    head, _, _ = _create(body, b"Expect: 100-continue\r\n").partition(b"\r\n\r\n")
    with _connect(server) as sock:
        reader = sock.makefile("rb")
        sock.sendall(head + b"\r\n\r\n")
        assert reader.readline().split()[1] == b"100" and reader.readline() == b"\r\n"
        sock.sendall(body)
        answer = _read_answer(reader)
    assert answer is not None and answer[0] == 201
    assert json.loads(answer[1])["metadata"]["name"] == "team"


def test_a_head_that_is_none_is_refused_and_the_connection_closed(server: FakeApiServer) -> None:
    read = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n\r\n"
    cases = {
        b"GET /api/v1/namespaces HTTP/1.1\r\nno colon here\r\n\r\n": 400,
        b"GET /api/v1/namespaces\r\n\r\n": 400,
        b"GET /api/v1/namespaces HTTP/one\r\n\r\n": 400,
        # An obsolete folded line (RFC 9112 section 5.2: a server may refuse it).
        b"GET /api/v1/namespaces HTTP/1.1\r\nX-Folded: one\r\n  two\r\n\r\n": 400,
        b"GET /api/v1/namespaces HTTP/2.0\r\n\r\n": 505,
        b"GET /api/v1/namespaces HTTP/1.1\r\n"
        + b"".join(b"X-%d: v\r\n" % i for i in range(101))
        + b"\r\n": 431,
        b"GET /api/v1/namespaces HTTP/1.1\r\nX-Long: " + b"v" * 70_000 + b"\r\n\r\n": 431,
    }
    for head, code in cases.items():
        answers = exchange(server, head, read)
        assert [status for status, _ in answers] == [code], head[:60]
    # A well-formed request on its own connection is answered as ever.
    assert [status for status, _ in exchange(server, read)] == [200]


def test_a_list_waiting_for_a_resource_version_lets_the_write_it_waits_for_through(
    server: FakeApiServer,
) -> None:
    """A list from a resourceVersion the store has not reached waits for it (up to 3 s, then 504): the
    write that reaches it, on another connection, is answered meanwhile and the list then served."""
    ahead = server.store.resource_version + 1
    answers: list[tuple[int, bytes]] = []
    waiting = threading.Thread(
        target=lambda: answers.extend(
            exchange(server, b"GET /api/v1/namespaces?resourceVersion=%d HTTP/1.1\r\nHost: x\r\n\r\n" % ahead)
        )
    )
    waiting.start()
    while not server.requests(verb="list"):  # the list has arrived (and waits)
        threading.Event().wait(0.01)
    assert [status for status, _ in exchange(server, _create(_namespace("team")))] == [201]
    waiting.join()
    assert [status for status, _ in answers] == [200]
    listed = json.loads(answers[0][1])
    assert int(listed["metadata"]["resourceVersion"]) >= ahead
    assert "team" in [item["metadata"]["name"] for item in listed["items"]]


def test_a_field_sent_twice_is_read_first_alone_and_in_full_with_get_all() -> None:
    fields = HeaderFields(
        [("Impersonate-User", "bob"), ("impersonate-group", "team-a"), ("Impersonate-Group", "team-b")]
    )
    assert fields.get("IMPERSONATE-GROUP") == "team-a"
    assert fields.get_all("Impersonate-Group") == ["team-a", "team-b"]
    assert fields.get_all("Impersonate-Uid") is None and fields.get("Impersonate-Uid", "") == ""
    assert "impersonate-user" in fields and list(fields) == [
        "Impersonate-User",
        "impersonate-group",
        "Impersonate-Group",
    ]
