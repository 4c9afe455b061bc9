"""The frozen tallies of a run's result (``run.result``): per provider, per dataset; and how a
result's values are deep-frozen (``Frozen``: lists as tuples, mappings as read-only
``types.MappingProxyType``) and added (``plus``, ``joined``, ``summed``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields
from decimal import Decimal
from types import MappingProxyType
from typing import Any, TypeVar

__all__ = ["DatasetTally", "Frozen", "ProviderTally", "joined", "plus", "summed"]

_ZERO = Decimal(0)
_T = TypeVar("_T", "ProviderTally", "DatasetTally")


def _frozen(value: Any) -> Any:
    """``value`` deep-frozen: lists and tuples as tuples, mappings as read-only mappings."""
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    return value


def _thawed(value: Any) -> Any:
    """``value`` with its read-only mappings as dicts (a pickle cannot hold a mapping proxy)."""
    if isinstance(value, tuple):
        return tuple(_thawed(v) for v in value)
    if isinstance(value, MappingProxyType):
        return {k: _thawed(v) for k, v in value.items()}
    return value


def plus(a: Decimal | int | None, b: Decimal | int | None) -> Any:
    """``a + b``; unknown (``None``) when either is: unknown is not zero."""
    return None if a is None or b is None else a + b


def joined(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    """``a`` then what of ``b`` is not in it (a note both shards say is said once)."""
    return a + tuple(x for x in b if x not in a)


def summed(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two mappings of counts or tallies added key by key."""
    out = dict(a)
    for key, value in b.items():
        out[key] = out[key] + value if key in out else value
    return out


def _added(a: _T, b: _T) -> _T:
    """Two tallies of one kind, every figure summed (``plus``)."""
    return type(a)(**{f.name: plus(getattr(a, f.name), getattr(b, f.name)) for f in fields(a)})


@dataclass(frozen=True)
class ProviderTally:
    """Rows, tokens and cost of the rows one provider (display name) served in this run."""

    rows: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: Decimal = _ZERO
    byok_usd: Decimal = _ZERO  # of ``cost_usd``: billed by the provider to the user's own key
    truncated: int = 0
    turns: int = 0  # answers to turns of rows regenerated turn by turn (``--turns all``)

    def __add__(self, other: ProviderTally) -> ProviderTally:
        """Every figure summed."""
        return _added(self, other)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "turns": self.turns,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost_usd": float(self.cost_usd),
            "byok_usd": float(self.byok_usd),
            "truncated": self.truncated,
        }


@dataclass(frozen=True)
class DatasetTally:
    """One dataset's rows and money: ``rows`` in the prompts, ``done`` finished (earlier runs
    included), ``not_sent`` this run, ``spent_usd`` counted against the cap (earlier runs too),
    ``share_usd`` its sub-cap when the cap was shared."""

    rows: int = 0
    done: int = 0
    not_sent: int = 0
    output_tokens: int = 0
    spent_usd: Decimal = _ZERO
    share_usd: Decimal | None = None

    def __add__(self, other: DatasetTally) -> DatasetTally:
        """Every figure summed (a sub-cap unknown when either is)."""
        return _added(self, other)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "done": self.done,
            "not_sent": self.not_sent,
            "output_tokens": self.output_tokens,
            "spent_usd": float(self.spent_usd),
            "share_usd": None if self.share_usd is None else float(self.share_usd),
        }


class Frozen:
    """Deep-freezes a dataclass's values as it is made (``_frozen``), and pickles it whole."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, list | tuple | Mapping):
                object.__setattr__(self, f.name, _frozen(value))

    def __reduce__(self) -> Any:
        values = {f.name: _thawed(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return (_made, (type(self), values))


def _made(cls: type[Any], values: dict[str, Any]) -> Any:
    return cls(**values)
