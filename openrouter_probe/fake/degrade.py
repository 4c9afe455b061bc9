"""Endpoints the fake server degrades: less accurate (``degrade``), other items at the same
accuracy (``flip``), broken tool calls (``tools``), noise everywhere, another chat template
(``parse_template``: more prompt tokens counted and billed) and hotter sampling
(``parse_sampling``).

Each option is ``{tag or slug: value}`` (``--degrade TAG=RATE`` on the command line); a tag that
matches no served endpoint is refused (``fake.tags.check_tags``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.fake.content import Answer, break_tools, flip, noisy, perturb
from openrouter_probe.fake.tags import first_match, parse_tagged, read_rate, refused_at

__all__ = ["Degradation", "parse_degrade", "parse_sampling", "parse_template", "template_tokens"]


def parse_degrade(
    specs: Iterable[str] | Mapping[str, float],
    *,
    option: str = "degrade",
    endpoints: Sequence[Endpoint] | None = None,
) -> dict[str, float]:
    """Parse ``--degrade TAG=RATE`` options (or another ``option`` of that form) into
    ``{tag: rate}`` (a mapping passes through, its rates checked). With ``endpoints``, a tag that
    matches none of them is refused."""
    form = "TAG=RATE (e.g. fireworks=0.2)"
    return parse_tagged(specs, option=option, form=form, read=read_rate, endpoints=endpoints)


def parse_template(
    specs: Iterable[str] | Mapping[str, int], *, endpoints: Sequence[Endpoint] | None = None
) -> dict[str, int]:
    """Parse ``--degrade-template TAG=N`` options into ``{tag: tokens}``: the endpoint renders
    a different chat template, so it counts (and bills) ``tokens`` more prompt tokens per request
    (fewer when negative; never below one). With ``endpoints``, a tag that matches none of them is
    refused."""

    def read(text: str, where: Message) -> int:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(
                refused_at(where, "N must be a whole number of prompt tokens (e.g. 12)")
            ) from None

    form = "TAG=N (e.g. fireworks=12)"
    return parse_tagged(specs, option="degrade_template", form=form, read=read, endpoints=endpoints)


def template_tokens(table: Mapping[str, int], endpoint: Endpoint, prompt_tokens: int) -> int:
    """The prompt tokens ``endpoint`` counts for a request of ``prompt_tokens``: more (or fewer,
    never below one) where ``table`` (``parse_template``'s) gives it another template."""
    return max(1, prompt_tokens + first_match(table, endpoint, 0)) if table else prompt_tokens


def parse_sampling(
    specs: Iterable[str] | Mapping[str, float], *, endpoints: Sequence[Endpoint] | None = None
) -> dict[str, float]:
    """Parse ``--degrade-sampling TAG=FACTOR`` options into ``{tag: factor}``: the endpoint samples
    at ``FACTOR`` times the temperature it was asked for (a provider that ignores or rescales
    ``temperature``). Its greedy answers, and so every temperature-0 test, are unchanged; only
    the distribution of its samples moves (``rules.sampling_model``), which the sampled arm of
    ``verify`` can see. With ``endpoints``, a tag that matches none of them is refused."""

    def read(text: str, where: Message) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(
                refused_at(where, "FACTOR must be a number above 0 (e.g. 1.3: 30% hotter)")
            )
        return value

    form = "TAG=FACTOR (e.g. chutes/int4=1.3)"
    return parse_tagged(specs, option="degrade_sampling", form=form, read=read, endpoints=endpoints)


@dataclass
class Degradation:
    """How endpoints answer differently: ``degrade`` (less accurate), ``flip`` (other items, the same
    accuracy), ``tools`` (broken tool calls), each ``{tag or slug: rate}``; ``noise`` on every
    endpoint; ``hard``, the share of arithmetic items the model gets wrong everywhere (at least the
    largest flip rate, so a flipped endpoint has items to be right on)."""

    degrade: dict[str, float] = field(default_factory=dict)
    flip: dict[str, float] = field(default_factory=dict)
    tools: dict[str, float] = field(default_factory=dict)
    noise: float = 0.0
    hard: float = 0.0
    _cache: dict[str, tuple[float, float, float]] = field(default_factory=dict, repr=False)
    #: Whether any answer can change (read once per request on the server's hot path).
    active: bool = False

    @classmethod
    def build(
        cls,
        endpoints: Sequence[Endpoint],
        *,
        degrade: Mapping[str, float] | Sequence[str] | None = None,
        flip: Mapping[str, float] | Sequence[str] | None = None,
        tools: Mapping[str, float] | Sequence[str] | None = None,
        noise: float = 0.0,
        hard: float = 0.0,
    ) -> Degradation:
        """Parse and check the options against the served ``endpoints`` (an unknown tag is one
        error naming the valid ones)."""
        out = cls(
            parse_degrade(degrade or {}, endpoints=endpoints),
            parse_degrade(flip or {}, option="degrade_flip", endpoints=endpoints),
            parse_degrade(tools or {}, option="degrade_tools", endpoints=endpoints),
            read_rate(str(noise), Message("fake-option", "{noise:bare}")),
            read_rate(str(hard), Message("fake-option", "{hard:bare}")),
        )
        largest = max(out.flip.values(), default=0.0)
        if largest > 0.5:
            raise ConfigError(
                Message(
                    "flip-over-half",
                    "{degrade_flip:bare} rate {largest:g}: must be at most 0.5 (the endpoint is "
                    "wrong on that share of items and right on as many)",
                    largest=largest,
                )
            )
        out.hard = max(out.hard, largest)
        out.active = bool(out.degrade or out.flip or out.tools or out.noise)
        return out

    def change(
        self, answer: Answer, endpoint: Endpoint, key: tuple[object, ...], noise_draw: float
    ) -> Answer:
        """``answer`` as ``endpoint`` gives it: its degradations (seeded by ``key``: the same
        request degrades the same way), then the noise every endpoint has (``noise_draw``: the
        request's own draw in [0, 1))."""
        degrade, flip_rate, tools_rate = self.rates_for(endpoint)
        if degrade > 0:
            answer = perturb(answer, rate=degrade, key=key)
        if flip_rate > 0:
            answer = flip(answer, rate=flip_rate)
        if tools_rate > 0:
            answer = break_tools(answer, rate=tools_rate, key=key)
        if self.noise > 0:
            answer = noisy(answer, noise_draw, rate=self.noise)
        return answer

    def rates_for(self, endpoint: Endpoint) -> tuple[float, float, float]:
        """``(degrade, flip, tools)`` rates of ``endpoint`` (the first matching entry of each)."""
        rates = self._cache.get(endpoint.tag)
        if rates is None:
            rates = self._cache[endpoint.tag] = (
                first_match(self.degrade, endpoint, 0.0),
                first_match(self.flip, endpoint, 0.0),
                first_match(self.tools, endpoint, 0.0),
            )
        return rates
