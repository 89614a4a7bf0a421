"""Kubernetes quantities are parsed exactly, as the API server reads them."""

from fractions import Fraction

import pytest

from kai_scheduler.api.quantity import format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", Fraction(1, 2)),
        ("100m", Fraction(1, 10)),
        ("1Gi", Fraction(2**30)),
        ("1Mi", Fraction(2**20)),
        ("1Ki", Fraction(1024)),
        ("1G", Fraction(10**9)),
        ("1k", Fraction(1000)),
        ("1E", Fraction(10**18)),  # the exa suffix, not an exponent
        ("2e3", Fraction(2000)),
        ("2E3", Fraction(2000)),
        ("1e-3", Fraction(1, 1000)),
        ("1.5", Fraction(3, 2)),
        ("0.1", Fraction(1, 10)),
        (".5", Fraction(1, 2)),
        ("+1", Fraction(1)),
        ("-1", Fraction(-1)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("250u", Fraction(1, 4000)),
        ("0", Fraction(0)),
    ],
)
def test_parses_quantity_strings_exactly(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


def test_exact_arithmetic_does_not_drift() -> None:
    # Ten 100m requests fill exactly one core; floats would leave 0.9999999999999999.
    assert sum((parse_quantity("100m") for _ in range(10)), Fraction(0)) == 1


@pytest.mark.parametrize(
    ("number", "expected"), [(2, Fraction(2)), (0.5, Fraction(1, 2)), (0.1, Fraction(1, 10))]
)
def test_accepts_yaml_numbers(number: float, expected: Fraction) -> None:
    assert parse_quantity(number) == expected


@pytest.mark.parametrize("text", ["1.2.3", "abc", "5X", "", "1e", "1 Gi", "Gi", "1GiB", "٥", "1e99999999"])
def test_rejects_invalid_strings_with_the_value_in_the_message(text: str) -> None:
    with pytest.raises(ValueError, match="not a valid quantity") as caught:
        parse_quantity(text)
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize("value", [True, False, None, [1], {"a": 1}, float("inf"), float("nan")])
def test_rejects_booleans_and_non_quantities(value: object) -> None:
    with pytest.raises(ValueError, match="expected a"):
        parse_quantity(value)


@pytest.mark.parametrize(
    ("value", "shown"),
    [(Fraction(2), "2"), (Fraction(1, 2), "0.5"), (Fraction(1, 3), "0.333"), (Fraction(1, 10000), "0.0001")],
)
def test_formats_quantities_for_messages(value: Fraction, shown: str) -> None:
    assert format_quantity(value) == shown


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("500m", "500m"),
        ("0.5", "500m"),
        ("16500m", "16500m"),
        ("1Gi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("1.5Gi", "1536Mi"),
        ("1Ti", "1Ti"),
        ("1G", "1000000000"),
        ("8", "8"),
        ("0", "0"),
        ("1u", "0.000001"),
        ("123456789n", "0.123456789"),
        ("1.3Ki", "1331200m"),
    ],
)
def test_quantities_are_written_exactly(text: str, written: str) -> None:
    from kai_scheduler.api.quantity import quantity_text

    assert quantity_text(parse_quantity(text)) == written
    assert parse_quantity(written) == parse_quantity(text)


def test_models_dump_quantities_as_kubernetes_writes_them() -> None:
    from kai_scheduler.api.objects import Container

    container = Container.model_validate({"resources": {"requests": {"cpu": "0.5", "memory": "1Gi"}}})
    assert container.model_dump(by_alias=True)["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
