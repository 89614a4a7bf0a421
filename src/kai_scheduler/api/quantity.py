"""Kubernetes resource quantities (`500m`, `1Gi`, `1G`, `2e3`, `0.5`), parsed exactly.

A quantity is a signed decimal number followed by an optional suffix: a binary SI suffix (`Ki` ... `Ei`),
a decimal SI suffix (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`), or a decimal exponent (`e3`, `E-2`).
The value is returned as a `Fraction` so that `100m` is exactly 1/10 and sums never drift.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache
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
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exponent>[eE][+-]?\d+)|(?P<decimal>[numkMGTPE]?))$",
    re.ASCII,  # `\d` must not accept other scripts' digits, which Kubernetes rejects
)
# Far beyond any real amount; a typo such as `1e99999999` would otherwise build a huge integer and hang.
_MAX_EXPONENT = 64


def parse_quantity(value: Any) -> Fraction:
    """Parse a quantity given as a string or a YAML number; raise ValueError naming what is wrong."""
    if value.__class__ is str:  # nearly always: first, and without the isinstance chain below
        return _parse_text(value)
    if isinstance(value, bool):
        raise ValueError(f"expected a quantity, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):  # YAML spells these `.inf` / `.nan`
            raise ValueError(f"expected a finite quantity, got {value!r}")
        # YAML numbers such as 0.5 are written in decimal; go through their shortest repr to stay exact.
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise ValueError(f"expected a quantity, got {type(value).__name__}")
    return _parse_text(value)


@lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction:
    """Cached: manifests repeat the same few quantities (`500m`, `1Gi`) thousands of times, and parsing a
    Fraction from text is the slowest step of loading a pod. Fractions are immutable, so sharing is safe."""
    text = value.strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"{value!r} is not a valid quantity (examples: 500m, 2, 1.5, 1Gi, 1G, 2e3)")
    number = Fraction(match["number"])
    if match["binary"]:
        return number * _BINARY[match["binary"]]
    if match["exponent"]:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"{value!r} is not a valid quantity (exponent out of range)")
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[match["decimal"] or ""]


def format_quantity(value: Fraction | float) -> str:
    """A short human form for messages: whole numbers bare, others to three decimals."""
    try:
        number = float(value)
    except OverflowError:  # a manifest may spell a number of hundreds of digits; messages must not crash
        return "-huge" if value < 0 else "huge"
    if number.is_integer():
        return str(int(number))
    text = f"{number:.3f}".rstrip("0")
    # Below a thousandth three decimals would print "0."; show the significant digits instead.
    return f"{number:.3g}" if text.endswith(".") else text


_EXACT_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20))


def quantity_text(value: Fraction) -> str:
    """A quantity as Kubernetes writes it, exactly (it parses back to `value`): whole numbers bare or with
    a binary suffix from `Mi` up (`8`, `32Gi`), thousandths as `500m`, anything finer as a plain decimal
    (`0.0000005`). A fraction no quantity spells (1/3) is rounded to 18 decimals."""
    if value.denominator == 1:
        number = value.numerator
        for suffix, size in _EXACT_BINARY:
            if number and number % size == 0:
                return f"{number // size}{suffix}"
        return str(number)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    digits = 1
    while (magnitude * 10**digits).denominator != 1 and digits < 18:
        digits += 1
    whole, rest = divmod(round(magnitude * 10**digits), 10**digits)
    return sign + f"{whole}.{rest:0{digits}d}".rstrip("0").rstrip(".")
