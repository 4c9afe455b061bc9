"""Quantities people type and read: token counts (``60M``, ``7.5M``, ``500k``), shares, amounts.

Parsed once, at the edge, into exact integers and ``Decimal``; errors name the option and show a
value that works. Shown in one style everywhere: money with two decimals (``$2.20/M``, more only
when a sub-cent price needs them, never an exponent), milliseconds and tokens per second as whole
numbers, shares as percent, token counts as ``45.45M``; JSON floats rounded to what they mean
(:func:`round_for_json`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from openrouter_probe.errors import ConfigError, Message

__all__ = [
    "format_number",
    "format_pct",
    "format_tokens",
    "format_usd",
    "format_usd_per_m",
    "parse_decimal",
    "parse_reasoning_share",
    "parse_token_count",
    "positive_usd",
    "recorded_usd",
    "round_for_json",
    "whole_number",
]

_LARGEST = Decimal(10) ** 15  # past this no budget, ratio or share is meant seriously
_SUFFIXES = {"": 1, "k": 1_000, "m": 1_000_000, "b": 1_000_000_000, "g": 1_000_000_000}
# Digits with optional ``_`` groups, or with commas as thousands separators only (``60,000,000``;
# ``1,5M`` is a decimal comma, which would silently mean 15M, so it does not match).
_TOKEN_RE = re.compile(
    r"^\s*(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d[\d_]*(?:\.\d+)?|\.\d+)\s*([kmbg]?)\s*$",
    re.IGNORECASE,
)


def parse_token_count(text: str | int, *, what: str = "token count") -> int:
    """Parse a token count: ``60M``, ``7.5M``, ``500k``, ``2B``, ``60_000_000``, ``60,000,000``.

    ``what`` names the option in the error (``--output-tokens``). Raises ``ConfigError`` for anything
    else, a negative number, a comma that is not a thousands separator (``1,5M``: write ``1.5M``),
    or a count that is not a whole number of tokens (``1.2345k``).

    Example::

        parse_token_count("7.5M")   # 7500000
    """
    if isinstance(text, bool):
        raise ConfigError(_said(what, "{text:s} is not a token count", text=repr(text)))
    if isinstance(text, int):
        if text < 0:
            raise ConfigError(
                _said(what, "{text:d} is negative; give a token count such as 60M", text=text)
            )
        return text
    match = _TOKEN_RE.match(str(text))
    if match is None and re.fullmatch(r"\s*\d+,\d+\s*[kmbg]?\s*", str(text), re.IGNORECASE):
        raise ConfigError(
            _said(
                what,
                "{text:s}: a comma only separates thousands (60,000,000); for a decimal write "
                "{fixed:s}",
                text=repr(text),
                fixed=str(text).strip().replace(",", "."),
            )
        )
    if match is None:
        raise ConfigError(
            _said(
                what,
                "{text:s} is not a token count; write it like 60M, 7.5M, 500k or 60000000",
                text=repr(text),
            )
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

    Returns ``(low, high)``; each must lie in ``[0, 1)`` (a share of 1 would leave no visible output)
    and a range is written low first: ``0.8:0.5`` is an error, not silently reordered.
    """
    if isinstance(value, tuple):
        parts: list[Any] = list(value)
    elif isinstance(value, str):
        parts = re.split(r"\s*[:,]\s*|(?<=\d)\s*-\s*(?=\d|\.)", value.strip())
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
    low, high = shares[0], shares[-1]
    if low > high:
        raise ConfigError(
            f"{what}: {value!r} is a reversed range; write the low share first: {high}:{low}"
        )
    return low, high


def format_tokens(count: int | None) -> str:
    """Show a token count for people: ``45.45M``, ``500k``, ``812``; ``-`` for none.

    Two decimals at most, trailing zeros dropped; the unit is chosen after rounding, so
    ``999_999`` reads ``1M`` (never ``1000k``).
    """
    if count is None:
        return "-"
    if abs(count) < 1_000:
        return str(count)
    for size, unit in ((1_000, "k"), (1_000_000, "M"), (1_000_000_000, "B")):
        shown = round(Decimal(count) / size, 2)
        if abs(shown) < 1000 or unit == "B":
            break
    return f"{shown:.2f}".rstrip("0").rstrip(".") + unit


def _decimal(value: Decimal | float | int) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


def format_usd(value: Decimal | float | int | None, *, unit: str = "") -> str:
    """Show an amount of USD: ``$2.20``, ``$10.00``, ``$1,234.50``; ``-`` for none.

    Two decimals; an amount under one dollar that two decimals would misstate keeps four
    significant digits (``$0.075``, ``$0.0375``); never an exponent (``Decimal('1E+1')`` reads
    ``$10.00``). ``unit`` is appended (``/M``).
    """
    if value is None:
        return "-"
    number = _decimal(value)
    if not number.is_finite():
        return str(number)
    magnitude = abs(number)
    if magnitude >= 1 or number == round(number, 2):
        text = f"{magnitude:,.2f}"
    else:
        places = 3 - magnitude.adjusted()  # four significant digits
        text = f"{round(magnitude, places):.{places}f}".rstrip("0")
        if len(text.rsplit(".", 1)[-1]) < 2:
            text = f"{magnitude:.2f}"
    sign = "-" if number < 0 else ""
    return f"{sign}${text}{unit}"


def format_usd_per_m(value: Decimal | float | int | None) -> str:
    """Show a price in USD per million tokens: ``$2.20/M``; ``-`` for none."""
    return "-" if value is None else format_usd(value, unit="/M")


def format_number(value: Decimal | float | int | None, *, decimals: int = 2) -> str:
    """Show a plain figure with ``decimals`` places (no unit, no exponent); ``-`` for none."""
    if value is None:
        return "-"
    return f"{_decimal(value):.{decimals}f}"


def format_pct(fraction: Decimal | float | int | None, *, decimals: int = 0) -> str:
    """Show a share (a fraction, ``0.5``) as percent: ``50%``; ``-`` for none."""
    if fraction is None:
        return "-"
    return f"{_decimal(fraction) * 100:.{decimals}f}%"


# Decimal places a JSON float keeps, by the unit its key ends in: what the figure means, and no
# float noise (0.9840000000000282, 11.999999) past it.
_JSON_PLACES = (
    ("_usd_per_m", 6),
    ("_usd", 6),
    ("_pct", 2),
    ("_ms", 1),
    ("_tps", 1),
    ("_h", 3),
    ("_s", 1),
    ("weight", 4),
    ("share", 4),
    ("share_min", 4),
    ("share_max", 4),
    ("fraction", 4),
    ("_token", 4),
)


def round_for_json(payload: Any, *, key: str | None = None) -> Any:
    """Return ``payload`` with every float rounded to what it means, for JSON output.

    A float under a key that names its unit keeps that unit's places (``_usd_per_m`` 6, ``_usd`` 6,
    ``_pct`` 2, ``_ms``/``_tps`` 1, ``_h`` 3, ``weight``/``share``/``fraction`` 4); any other float
    keeps 10 significant digits, which removes binary noise and nothing a person reads. A float that
    is a whole number stays a float (``2.0``); ``Decimal`` values become floats the same way.
    """
    if isinstance(payload, bool) or payload is None:
        return payload
    if isinstance(payload, Decimal):
        payload = float(payload) if payload.is_finite() else str(payload)
    if isinstance(payload, float):
        if payload != payload or payload in (float("inf"), float("-inf")):
            return None
        places = next((n for end, n in _JSON_PLACES if key is not None and key.endswith(end)), None)
        if places is not None:
            return round(payload, places) + 0.0  # + 0.0: no -0.0
        return float(f"{payload:.10g}") + 0.0
    if isinstance(payload, Mapping):
        return {k: round_for_json(v, key=str(k)) for k, v in payload.items()}
    if isinstance(payload, list | tuple):
        return [round_for_json(v, key=key) for v in payload]
    return payload


def _said(what: str, template: str, **values: Any) -> Message:
    """``what: ...``: ``what`` a keyword (``budget_usd``, each interface says it its way) or a
    name said as it is (an option, ``--prompt-ratio``; a field)."""
    if what.isidentifier():
        return Message("quantity", f"{{{what}:bare}}: " + template, **values)
    return Message("quantity", "{what:s}: " + template, what=what, **values)


def whole_number(value: Any, what: str) -> int:
    """Check a count given in Python or on the command line: a whole number >= 1. ``what`` names
    it: a keyword (``concurrency``, said ``concurrency=0``) or an option (``--n``, said ``--n 0``)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        if what.isidentifier():
            raise ConfigError(
                Message("not-whole", f"{{{what}=}}: a whole number >= 1", **{what: value})
            )
        raise ConfigError(f"{what} {value!r}: a whole number >= 1")
    return value


def parse_decimal(value: Any, what: str) -> Decimal:
    """Parse a finite decimal number; ``what`` names the option in the error."""
    try:
        result = Decimal(str(value).strip())
    except InvalidOperation:
        raise ConfigError(_said(what, "{value:s} is not a number", value=repr(value))) from None
    if not result.is_finite():
        raise ConfigError(_said(what, "{value:s} is not a finite number", value=repr(value)))
    if result.copy_abs() > _LARGEST:  # copy_abs: abs() would overflow the context first
        raise ConfigError(_said(what, "{value:s} is too large to be meant", value=repr(value)))
    return result


def positive_usd(value: Any, what: str) -> Decimal:
    """Check a budget given in Python or on the command line: a positive, finite amount of USD.
    ``what`` names it: a keyword (``budget_usd``, said ``budget_usd=0``) or an option
    (``--budget-usd``, said ``--budget-usd 0``)."""
    amount = parse_decimal(value, what)
    if amount <= 0:
        if what.isidentifier():
            template = f"{{{what}=}}: a positive amount of USD, e.g. 100"
            raise ConfigError(Message("budget-not-positive", template, **{what: value}))
        raise ConfigError(f"{what} {value}: a positive amount of USD, e.g. 100")
    return amount


def recorded_usd(value: Any, where: str, *, damaged: str) -> Decimal:
    """Read an amount of USD the project itself recorded (an output line, the spend journal).

    ``None`` (nothing recorded) is zero. Anything else that is not a finite, non-negative number is
    a ``ConfigError`` naming ``where`` and saying what to do (``damaged``): an amount that cannot be
    read is never taken as zero, which would lower the spend the cap counts.
    """
    if value is None:
        return Decimal(0)
    amount = Decimal("NaN")
    if not isinstance(value, bool):
        with contextlib.suppress(ArithmeticError):
            amount = Decimal(str(value))
    if not amount.is_finite() or amount < 0:
        raise ConfigError(f"{where}: {value!r} is not an amount of USD; {damaged}")
    return amount
