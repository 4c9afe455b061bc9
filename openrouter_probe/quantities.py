"""Quantities people type: token counts (``60M``, ``7.5M``, ``500k``), shares, amounts.

Parsed once, at the edge, into exact integers and ``Decimal``; errors name the option and show a
value that works.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from openrouter_probe.errors import ConfigError

__all__ = ["format_tokens", "parse_decimal", "parse_reasoning_share", "parse_token_count"]

_LARGEST = Decimal(10) ** 15  # past this no budget, ratio or share is meant seriously
_SUFFIXES = {"": 1, "k": 1_000, "m": 1_000_000, "b": 1_000_000_000, "g": 1_000_000_000}
_TOKEN_RE = re.compile(r"^\s*(\d[\d_,]*(?:\.\d+)?|\.\d+)\s*([kmbg]?)\s*$", re.IGNORECASE)


def parse_token_count(text: str | int, *, what: str = "token count") -> int:
    """Parse a token count: ``60M``, ``7.5M``, ``500k``, ``2B``, ``60_000_000`` or a plain integer.

    ``what`` names the option in the error (``--output-tokens``). Raises ``ConfigError`` for anything
    else, a negative number, or a count that is not a whole number of tokens (``1.2345k``).

    Example::

        parse_token_count("7.5M")   # 7500000
    """
    if isinstance(text, bool):
        raise ConfigError(f"{what}: {text!r} is not a token count")
    if isinstance(text, int):
        if text < 0:
            raise ConfigError(f"{what}: {text} is negative; give a token count such as 60M")
        return text
    match = _TOKEN_RE.match(str(text))
    if match is None:
        raise ConfigError(
            f"{what}: {text!r} is not a token count; write it like 60M, 7.5M, 500k or 60000000"
        )
    number, suffix = match.groups()
    value = Decimal(number.replace("_", "").replace(",", "")) * _SUFFIXES[suffix.lower()]
    if value != value.to_integral_value():
        raise ConfigError(f"{what}: {text!r} is not a whole number of tokens")
    return int(value)


def parse_reasoning_share(
    value: str | float | Decimal | tuple[float | Decimal | str, float | Decimal | str],
    *,
    what: str = "reasoning share",
) -> tuple[Decimal, Decimal]:
    """Parse a reasoning share of output: one fraction (``0.6``) or a range (``0.5:0.8``, ``0.5-0.8``).

    Returns ``(low, high)``; each must lie in ``[0, 1)`` (a share of 1 would leave no visible output).
    """
    if isinstance(value, tuple):
        parts: list[Any] = list(value)
    elif isinstance(value, str):
        parts = [p for p in re.split(r"\s*[:,]\s*|(?<=\d)\s*-\s*(?=\d|\.)", value.strip())]
    else:
        parts = [value]
    if len(parts) not in (1, 2):
        raise ConfigError(f"{what}: {value!r} is not a share; give 0.6 or a range such as 0.5:0.8")
    shares: list[Decimal] = []
    for part in parts:
        try:
            share = Decimal(str(part).strip())
        except InvalidOperation:
            raise ConfigError(
                f"{what}: {part!r} is not a number; give a fraction such as 0.6 or a range 0.5:0.8"
            ) from None
        if not share.is_finite() or not Decimal(0) <= share < 1:
            raise ConfigError(
                f"{what}: {part} is outside [0, 1); give the reasoning part of output as a "
                "fraction, e.g. 0.6 or a range 0.5:0.8"
            )
        shares.append(share)
    low, high = min(shares), max(shares)
    return low, high


def format_tokens(count: int | None) -> str:
    """A token count for people: ``45.45M``, ``500k``, ``812``; ``-`` for none."""
    if count is None:
        return "-"
    for size, unit in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")):
        if abs(count) >= size:
            return f"{count / size:.2f}".rstrip("0").rstrip(".") + unit
    return str(count)


def parse_decimal(value: Any, what: str) -> Decimal:
    """Parse a finite decimal number; ``what`` names the option in the error."""
    try:
        result = Decimal(str(value).strip())
    except InvalidOperation:
        raise ConfigError(f"{what}: {value!r} is not a number") from None
    if not result.is_finite():
        raise ConfigError(f"{what}: {value!r} is not a finite number")
    if result.copy_abs() > _LARGEST:  # copy_abs: abs() would overflow the context first
        raise ConfigError(f"{what}: {value!r} is too large to be meant")
    return result
