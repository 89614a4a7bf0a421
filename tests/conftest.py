"""Suite-wide settings: property tests explore the same examples on every run, so a red run can be
reproduced and CI never fails on a new random draw."""

from hypothesis import settings

settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.load_profile("repeatable")
