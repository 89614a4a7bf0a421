"""`Authorization`: lightkube's authentication flow (a bearer token, a token file, an exec plugin, basic
auth) as the `Authorization` header of the API client's requests, whichever transport sends them.

Every flow sets the same header on every request until a 401: it is run once and its header reused, rather
than built into a throw-away httpx2 request each time (a sixth of the client's cost when it was). A 401
runs the flow again as after a rejection (a token file is read again, an exec plugin run again), and the
request is sent once more if the flow has a new credential."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx2

_Answer = TypeVar("_Answer")


class Authorization:
    """The header of `auth` (None: requests go without one)."""

    def __init__(self, auth: httpx2.Auth | None) -> None:
        self.auth = auth
        self.header: str | None = None  # from `auth`, until a 401

    async def _run(self, method: str, url: str, *, rejected: bool = False) -> bool:
        """The flow's header into `header`; False when, after a rejection, the flow has nothing new."""
        assert self.auth is not None
        request = httpx2.Request(method, url)
        flow = self.auth.async_auth_flow(request)
        request = await flow.__anext__()
        if rejected:
            try:
                request = await flow.asend(httpx2.Response(401, request=request))
            except StopAsyncIteration:
                return False
        self.header = request.headers.get("Authorization")
        return True

    async def send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        send: Callable[[], Awaitable[_Answer]],
        status_of: Callable[[_Answer], int],
        discard: Callable[[_Answer], None],
    ) -> _Answer:
        """`send()` with the header in `headers`; after a 401 (its answer `discard`ed) once more with a new
        credential, if the flow has one."""
        if self.auth is not None and self.header is None:
            await self._run(method, url)
        retried = False
        while True:
            if self.header:
                headers["Authorization"] = self.header
            answer = await send()
            if status_of(answer) != 401 or self.auth is None or retried:
                return answer
            if not await self._run(method, url, rejected=True):
                return answer
            discard(answer)
            retried = True


__all__ = ["Authorization"]
