"""A sampling mix per row: the temperature, reasoning effort and thinking of each row, drawn.

A mix is written as speculators' ``regenerate-responses`` cycles are (``0.6,0.8,1.0``: equal
shares), or with weights (``on=0.8,off=0.2``; they need not sum to 1). Each value is drawn by a
hash of the seed, the mix and the row id (``Mix.draw``), not by a running random generator, so the
same row gets the same draw on a resume, on every shard and in any process. A model card's fixed
sampling (``rules.sampling``) holds: a temperature mix that asks another temperature is refused
(``SamplingMix.check``). ``Shares`` counts what was drawn (the dry run) or recorded (``audit``)
per dataset. docs/generate.md ("A sampling mix per row") has the rules and their sources.

Example::

    mix = SamplingMix.of(thinking="on=0.7,off=0.3", seed=1)
    mix.draw("row-17").reasoning(None)   # {'enabled': True} or {'enabled': False}
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from openrouter_probe.errors import OptionError, Shown
from openrouter_probe.rules.sampling import SamplingAdvice, thinking_on

__all__ = [
    "MIX_KEYWORDS",
    "Draw",
    "Mix",
    "SamplingMix",
    "Shares",
    "count_sampling",
    "parse_mix",
]

_EFFORTS = ("max", "xhigh", "high", "medium", "low", "minimal", "none")
_THINKING = {"on": True, "off": False}
#: Each mix's keyword (``generate()``'s; the CLI's ``--temperature-mix`` ...) by what it draws.
MIX_KEYWORDS = {
    "temperature": "temperature_mix",
    "reasoning_effort": "reasoning_effort_mix",
    "thinking": "thinking_mix",
}
_EXAMPLES = {
    "temperature": "0.6,0.8,1.0 or 0.6=1,1.0=3",
    "reasoning_effort": "low,high,max or low=0.2,high=0.8",
    "thinking": "on=0.8,off=0.2",
}


@dataclass(frozen=True)
class Mix:
    """What one mix draws (``name``: ``temperature``, ``reasoning_effort`` or ``thinking``): its
    ``values`` and each one's share (summing to 1)."""

    name: str
    values: tuple[Any, ...]
    shares: tuple[float, ...]

    def draw(self, seed: int, row_id: str) -> Any:
        """The value of row ``row_id``: a uniform number from a hash of ``seed``, the mix and the
        row id, placed on the shares (the same in any process, on any shard)."""
        key = f"{seed}\0{self.name}\0{row_id}".encode()
        u = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2.0**64
        at = bisect.bisect_right(list(itertools.accumulate(self.shares)), u)
        return self.values[min(at, len(self.values) - 1)]  # past the last share's rounding

    def describe(self) -> str:
        """``on 80%, off 20%``: each value and its share."""
        return ", ".join(
            f"{_said(v)} {s:.0%}" for v, s in zip(self.values, self.shares, strict=True)
        )


def _said(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _value(name: str, text: str) -> Any:
    """One value of mix ``name`` read from ``text`` (``ValueError``: not one)."""
    if name == "thinking":
        if text.lower() not in _THINKING:
            raise ValueError("on or off")
        return _THINKING[text.lower()]
    if name == "reasoning_effort":
        if text not in _EFFORTS:
            raise ValueError("one of " + ", ".join(_EFFORTS))
        return text
    try:
        number = float(text)
    except ValueError:
        number = -1.0
    if not 0 <= number <= 2:
        raise ValueError("a temperature from 0 to 2 (OpenRouter's range)")
    return number


def parse_mix(name: str, spec: str | Mapping[str, float]) -> Mix:
    """Mix ``name`` from ``a,b,c`` (equal shares), ``a=w,b=w`` (weighted) or a mapping of value
    to weight. Raises ``OptionError`` naming the keyword (``thinking_mix``...) and the fix."""
    keyword = MIX_KEYWORDS[name]
    if isinstance(spec, str):
        items = [part.strip() for part in spec.split(",") if part.strip()]
        pairs = [item.partition("=") for item in items]
        weighted = any(sep for _, sep, _ in pairs)  # then every value needs its weight
        raw = [(v.strip(), w.strip() if sep else ("" if weighted else "1")) for v, sep, w in pairs]
    else:
        raw = [(str(v), str(w)) for v, w in spec.items()]

    def refuse(why: str) -> OptionError:
        return OptionError(
            f"{{{keyword}=}}: {why}; e.g. {_EXAMPLES[name]}", **{keyword: Shown(_text(spec))}
        )

    if not raw:
        raise refuse("give at least one value")
    values: list[Any] = []
    weights: list[float] = []
    for text, weight in raw:
        try:
            value = _value(name, text)
        except ValueError as exc:
            raise refuse(f"{text!r} is not {exc}") from None
        try:
            share = float(weight)
        except ValueError:
            share = -1.0
        if not 0 < share < float("inf"):
            raise refuse(f"{text}={weight or '?'}: a weight is a number above 0")
        if value in values:
            raise refuse(f"{text} is given twice")
        values.append(value)
        weights.append(share)
    total = sum(weights)
    return Mix(name, tuple(values), tuple(w / total for w in weights))


def _text(spec: str | Mapping[str, float]) -> str:
    return spec if isinstance(spec, str) else ",".join(f"{k}={v}" for k, v in spec.items())


@dataclass(frozen=True)
class Draw:
    """One row's draw: a temperature, a reasoning effort, thinking on or off (``None``: that mix
    is not given)."""

    temperature: float | None = None
    effort: str | None = None
    thinking: bool | None = None

    def reasoning(self, run: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The ``reasoning`` object the row sends, the run's own (``run``) where the draw leaves
        it: thinking off is ``{"enabled": false}``; on, the drawn or the run's effort, else the
        run's object, else ``{"enabled": true}``."""
        if self.thinking is False:
            return {"enabled": False}
        if self.effort is not None:
            return {"effort": self.effort}
        if self.thinking is True:
            if run is not None and thinking_on(run):
                return dict(run)
            return {"enabled": True}
        return None if run is None else dict(run)


@dataclass(frozen=True)
class SamplingMix:
    """The mixes of a run and their ``seed`` (see the module); build it with :meth:`of`."""

    temperature: Mix | None = None
    reasoning_effort: Mix | None = None
    thinking: Mix | None = None
    seed: int = 0

    @classmethod
    def of(
        cls,
        *,
        temperature: str | Mapping[str, float] | None = None,
        reasoning_effort: str | Mapping[str, float] | None = None,
        thinking: str | Mapping[str, float] | None = None,
        seed: int = 0,
    ) -> SamplingMix | None:
        """The run's mixes (``None``: none given), each checked (``parse_mix``); thinking off
        drawn beside an effort mix that holds ``none`` says the same thing twice: refused."""
        given = {"temperature": temperature, "reasoning_effort": reasoning_effort,
                 "thinking": thinking}  # fmt: skip
        mixes = {name: parse_mix(name, spec) for name, spec in given.items() if spec is not None}
        if not mixes:
            return None
        effort = mixes.get("reasoning_effort")
        if "thinking" in mixes and effort is not None and "none" in effort.values:
            raise OptionError(
                "{reasoning_effort_mix=} holds none (thinking off) and {thinking_mix=} draws "
                "thinking too: say thinking off once, in {thinking_mix:bare}",
                reasoning_effort_mix=Shown(_text(reasoning_effort or "")),
                thinking_mix=Shown(_text(thinking or "")),
            )
        return cls(seed=seed, **mixes)

    @property
    def mixes(self) -> tuple[Mix, ...]:
        return tuple(m for m in (self.temperature, self.reasoning_effort, self.thinking) if m)

    def draw(self, row_id: str) -> Draw:
        """Row ``row_id``'s draw (``Mix.draw`` of each mix)."""

        def one(mix: Mix | None) -> Any:
            return None if mix is None else mix.draw(self.seed, row_id)

        return Draw(one(self.temperature), one(self.reasoning_effort), one(self.thinking))

    def describe(self) -> str:
        """One line for people: each mix's shares and the seed."""
        parts = [f"{m.name.replace('_', ' ')} {m.describe()}" for m in self.mixes]
        return f"sampling mix, drawn per row from seed {self.seed}: " + "; ".join(parts)

    def check(
        self, model: str, advice: SamplingAdvice | None, run: Mapping[str, Any] | None
    ) -> None:
        """Refuse a temperature mix that breaks what ``model``'s card fixes (``advice``): every
        temperature it may draw must be the card's for the thinking the row is sent with
        (``run``: the run's own ``reasoning``). Raises ``OptionError`` (a usage error) naming the
        rule."""
        mix = self.temperature
        if advice is None or mix is None:
            return
        if self.thinking is not None:
            states = {True, False}
        elif self.reasoning_effort is not None:
            states = {thinking_on({"effort": e}) for e in self.reasoning_effort.values}
        else:
            states = {thinking_on(run)}
        wrong = [
            (t, on)
            for t in mix.values
            for on in sorted(states, reverse=True)
            if advice.values(thinking=on).get("temperature", t) != t
        ]
        if not wrong:
            return
        t, on = wrong[0]
        fixed = advice.values(thinking=on)["temperature"]
        raise OptionError(
            "{temperature_mix=}: {model:s}'s card fixes temperature {fixed:g} {mode:s} "
            "({source:s}), and the mix may draw {drawn:g}: drop {temperature_mix:bare} (the card "
            "sets the temperature), and mix thinking with {thinking_mix:bare} instead",
            temperature_mix=Shown(",".join(_said(v) for v in mix.values)),
            thinking_mix=None,
            model=model,
            fixed=fixed,
            mode="with thinking" if on else "without thinking",
            source=advice.source,
            drawn=t,
        )


def count_sampling(
    counts: dict[str, dict[str, dict[str, int]]],
    dataset: str,
    sampling_params: Mapping[str, Any] | None,
) -> None:
    """Count into ``counts`` one row of ``dataset`` sent with ``sampling_params`` (``None``: not
    recorded, counted as ``unknown``, never as a default); ``Shares(counts)`` is the value."""
    by = counts.setdefault(dataset, {})
    if sampling_params is None:
        recorded = by.setdefault("recorded", {})
        recorded["unknown"] = recorded.get("unknown", 0) + 1
        return
    reasoning = sampling_params.get("reasoning")
    effort = sampling_params.get("reasoning_effort")
    said = reasoning is not None or effort is not None
    seen = {
        # nothing said: the model's default, not a guess at it
        "thinking": ("on" if thinking_on(reasoning, effort) else "off")
        if said
        else "model's default",
        "temperature": _said(sampling_params["temperature"])
        if "temperature" in sampling_params
        else "provider's default",
    }
    if isinstance(reasoning, Mapping) and "effort" in reasoning:
        seen["reasoning_effort"] = str(reasoning["effort"])
    elif effort is not None:
        seen["reasoning_effort"] = str(effort)
    for name, value in seen.items():
        counter = by.setdefault(name, {})
        counter[value] = counter.get(value, 0) + 1


@dataclass(frozen=True)
class Shares:
    """What rows were sampled with, per dataset (the dry run's draws, ``audit``'s records): how
    many rows thought, and each temperature and effort they were sent with. A value: the counts
    ``count_sampling`` made, read-only."""

    counts: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        read_only = {
            d: MappingProxyType({k: MappingProxyType(dict(v)) for k, v in by.items()})
            for d, by in self.counts.items()
        }
        object.__setattr__(self, "counts", MappingProxyType(read_only))

    def __reduce__(self) -> Any:
        return (Shares, (self.to_dict(),))

    def to_dict(self) -> dict[str, dict[str, dict[str, int]]]:
        return {d: {k: dict(v) for k, v in by.items()} for d, by in sorted(self.counts.items())}

    def lines(self) -> list[str]:
        """One line per dataset: ``B3: thinking on 700 (70.0%), off 300 (30.0%); ...``."""
        out = []
        for dataset, by in sorted(self.counts.items()):
            parts = []
            for name, counter in by.items():
                total = sum(counter.values())
                said = ", ".join(
                    f"{value} {n:,} ({n / total:.1%})"
                    for value, n in sorted(counter.items(), key=lambda kv: -kv[1])
                )
                parts.append(f"{name.replace('_', ' ')} {said}")
            out.append(f"{dataset}: " + "; ".join(parts))
        return out
