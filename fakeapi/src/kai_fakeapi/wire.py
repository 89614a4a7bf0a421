"""JSON in and out of the fake API server: orjson, and the standard library for what orjson refuses.

The server encodes every answer and watch event and decodes every request body: at the live benchmark's
pace (issue #23) the standard library's encoder alone was a sixth of the server's CPU, and the server's
CPU sets the pace of the benchmark as much as the components' do. orjson does the same work in a tenth
(encoding) to a quarter (decoding) of the time. Where orjson refuses a document the standard library takes
(integers beyond 64 bits, keys that are not strings; on the way in NaN, non-UTF-8 text, lone surrogates),
the standard library handles it, so what the server accepts, refuses and stores is unchanged, and so are
its error messages. The bytes sent differ only in form: non-ASCII text goes as UTF-8 rather than `\\u`
escapes (as the real API server sends it).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# Types the standard library cannot write go to it all the same, so that they fail as they did.
_AS_JSON_WRITES = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def dumps(document: Any) -> bytes:
    """Compact JSON, as `json.dumps(document, separators=(",", ":")).encode()`."""
    try:
        return orjson.dumps(document, option=_AS_JSON_WRITES)
    except TypeError:
        return json.dumps(document, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    """`json.loads(data)`, raising its ValueError (and message) on what is no JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


__all__ = ["dumps", "loads"]
