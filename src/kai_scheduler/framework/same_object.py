"""A value that stands for one object, told equal to another only when both stand for the same object:
for what a plugin reads that is one object until it changes (the storage objects), in a value compared
from one cycle to the next. It holds the object, so no later object can take its identity."""

from __future__ import annotations


class Same:
    __slots__ = ("held",)

    def __init__(self, held: object) -> None:
        self.held = held

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.held is self.held

    def __hash__(self) -> int:
        return id(self.held)
