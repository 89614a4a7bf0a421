"""Kubernetes resource quantities (`500m`, `1Gi`, `1G`, `2e3`, `0.5`), parsed exactly.

A quantity is a signed decimal number followed by an optional suffix: a binary SI suffix (`Ki` ... `Ei`),
a decimal SI suffix (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`), or a decimal exponent (`e3`, `E-2`).
The value is returned as a `Fraction` so that `100m` is exactly 1/10 and sums never drift.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exponent>[eE][+-]?\d+)|(?P<decimal>[numkMGTPE]?))$"
)


def parse_quantity(value: Any) -> Fraction:
    """Parse a quantity given as a string or a YAML number; raise ValueError naming what is wrong."""
    if isinstance(value, bool):
        raise ValueError(f"expected a quantity, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        # YAML numbers such as 0.5 are written in decimal; go through their shortest repr to stay exact.
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise ValueError(f"expected a quantity, got {type(value).__name__}")
    text = value.strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"{value!r} is not a valid quantity (examples: 500m, 2, 1.5, 1Gi, 1G, 2e3)")
    number = Fraction(match["number"])
    if match["binary"]:
        return number * _BINARY[match["binary"]]
    if match["exponent"]:
        return number * Fraction(10) ** int(match["exponent"][1:])
    return number * _DECIMAL[match["decimal"] or ""]


def format_quantity(value: Fraction | float) -> str:
    """A short human form for messages: whole numbers bare, others to three decimals."""
    number = float(value)
    return str(int(number)) if number.is_integer() else f"{number:.3f}".rstrip("0")
