"""`runtime.forked.in_forked_child`: a function computed in a forked child, its answer (or its error) back
in the parent; the child shares what the parent holds without it being serialised."""

from __future__ import annotations

import asyncio
import os

import pytest

from kai_scheduler.k8s.runtime.forked import ChildFailed, in_forked_child


class _Unpicklable:
    """Held by the parent; a child that shares it can still read it (pickling it would fail)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("not picklable")


def _work(arg: tuple[_Unpicklable, int]) -> tuple[int, int]:
    held, times = arg
    return held.value * times, os.getpid()


def _fail(arg: int) -> int:
    raise ValueError(f"bad {arg}")


def test_the_answer_comes_from_another_process() -> None:
    value, pid = asyncio.run(in_forked_child(_work, (_Unpicklable(21), 2)))
    assert value == 42 and pid != os.getpid()


def test_an_error_in_the_child_is_raised_in_the_parent() -> None:
    with pytest.raises(ChildFailed, match="bad 7"):
        asyncio.run(in_forked_child(_fail, 7))
