"""How a bind attempt fails."""

from __future__ import annotations


class BindFailure(Exception):
    """An attempt that failed; `final` ones are not retried (the pod is gone, replaced, bound elsewhere)."""

    def __init__(self, reason: str, *, final: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.final = final


__all__ = ["BindFailure"]
