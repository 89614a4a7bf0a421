"""The fake API server reads a request's head itself (`request_head.py`): what a client sends in it is
read as the standard library read it, and a head that is none is refused with the code the real API
server gives, the connection then closed."""

from __future__ import annotations

import io
import json
import socket
from urllib.parse import urlsplit

from kai_fakeapi import FakeApiServer, request_head


def exchange(server: FakeApiServer, *requests: bytes) -> list[tuple[int, bytes]]:
    """Send `requests` on one connection, one after the other; (status, body) of each answer read."""
    parts = urlsplit(server.url)
    answers = []
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=10) as sock:
        reader = sock.makefile("rb")
        for request in requests:
            sock.sendall(request)
            status_line = reader.readline()
            if not status_line:
                break
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            answers.append((int(status_line.split()[1]), reader.read(length)))
    return answers


def test_fields_are_read_with_any_case_surrounding_spaces_and_folded_lines(server: FakeApiServer) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}).encode()
    create = (
        b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\ncontent-TYPE:   application/json  \r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\nX-Folded: one\r\n  two\r\n\r\n" + body
    )
    read = b"GET /api/v1/namespaces/team HTTP/1.1\r\nHost: x\r\n\r\n"
    (created, _), (found, answer) = exchange(server, create, read)  # one connection: kept alive
    assert (created, found) == (201, 200)
    assert json.loads(answer)["metadata"]["name"] == "team"


def test_a_head_that_is_none_is_refused_and_the_connection_closed(server: FakeApiServer) -> None:
    read = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n\r\n"
    cases = {
        b"GET /api/v1/namespaces HTTP/1.1\r\nno colon here\r\n\r\n": 400,
        b"GET /api/v1/namespaces\r\n\r\n": 400,
        b"GET /api/v1/namespaces HTTP/one\r\n\r\n": 400,
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


def test_a_field_sent_twice_is_read_first_alone_and_in_full_with_get_all() -> None:
    head = io.BytesIO(
        b"Impersonate-User: bob\r\nimpersonate-group: team-a\r\nImpersonate-Group:  team-b \r\n\r\nbody"
    )
    fields = request_head.header_fields(head)
    assert fields.get("IMPERSONATE-GROUP") == "team-a"
    assert fields.get_all("Impersonate-Group") == ["team-a", "team-b"]
    assert fields.get_all("Impersonate-Uid") is None and fields.get("Impersonate-Uid", "") == ""
    assert "impersonate-user" in fields and list(fields) == [
        "Impersonate-User",
        "impersonate-group",
        "Impersonate-Group",
    ]
    assert head.read() == b"body"  # the body is left to be read
