"""Suite-wide settings: property tests explore the same examples on every run, so a red run can be
reproduced and CI never fails on a new random draw; and no test leaves logging configured for the next."""

import logging
from collections.abc import Iterator

import pytest
from hypothesis import settings

settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.load_profile("repeatable")


@pytest.fixture(autouse=True)
def _logging_as_found() -> Iterator[None]:
    """`kai-scheduler run` configures logging for its process (`k8s.runtime.logs.configure`): the root
    handler onto stderr, the product's level. Run in-process by a test, that would outlive it: a handler
    writing to a capture stream pytest has closed, and a level that lets later tests' INFO lines through."""
    root, product = logging.getLogger(), logging.getLogger("kai_scheduler")
    handlers, root_level, product_level = _not_pytests(root.handlers), root.level, product.level
    yield
    # pytest adds and removes its own capture handlers around each phase: leave those as they are.
    root.handlers[:] = [h for h in root.handlers if h not in _not_pytests(root.handlers)] + handlers
    root.setLevel(root_level)
    product.setLevel(product_level)


def _not_pytests(handlers: list[logging.Handler]) -> list[logging.Handler]:
    return [handler for handler in handlers if not type(handler).__module__.startswith("_pytest")]
