"""JSON to and from the API server: orjson, and the standard library for what orjson refuses.

Every request body and every answer and watch event is a JSON document: on the 10,000-pod live row (issue
#23) the standard library's encoder and decoder were about 7% of the `run` process's CPU, and orjson does
the same work in a tenth (encoding) to a quarter (decoding) of the time. Where orjson refuses a document
that the standard library takes (integers beyond 64 bits, keys that are not strings; on the way in NaN,
non-UTF-8 text, lone surrogates), the standard library handles it, so every document reads and writes as it
did. The bytes sent differ only in form: non-ASCII text goes as UTF-8 rather than `\\u` escapes.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# Types the standard library cannot write go to it all the same, so that they fail as they did (orjson
# would write datetimes and dataclasses on its own).
_AS_JSON_WRITES = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def encode(document: Any) -> bytes:
    """Compact JSON (no spaces), as `json.dumps(document, separators=(",", ":"))` writes it."""
    try:
        return orjson.dumps(document, option=_AS_JSON_WRITES)
    except TypeError:
        return json.dumps(document, separators=(",", ":")).encode()


def decode(data: bytes | str) -> Any:
    """The document `data` holds; raises ValueError (json's, with its message) when it holds none."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


__all__ = ["decode", "encode"]
