"""Endpoints the fake server degrades: less accurate (``degrade``), other items at the same
accuracy (``flip``), broken tool calls (``tools``), noise everywhere, and another chat template
(``parse_template``: more prompt tokens counted and billed).

Each option is ``{tag or slug: rate}`` (``--degrade TAG=RATE`` on the command line); a tag that
matches no served endpoint is refused (``fake.tags.check_tags``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.fake.content import Answer, break_tools, flip, noisy, perturb
from openrouter_probe.fake.tags import check_tags, option_value, read_rate, refused_at, tag_values
from openrouter_probe.rules.routing import matches

__all__ = ["Degradation", "parse_degrade", "parse_template", "template_tokens"]


def parse_degrade(
    specs: Iterable[str] | Mapping[str, float], *, option: str = "degrade"
) -> dict[str, float]:
    """Parse ``--degrade TAG=RATE`` options (or another ``option`` of that form) into
    ``{tag: rate}`` (a mapping passes through, its rates checked)."""
    mapping = isinstance(specs, Mapping)
    out: dict[str, float] = {}
    for tag, rate in tag_values(specs, option=option, form="TAG=RATE (e.g. fireworks=0.2)"):
        name = str(tag) if mapping else str(tag).strip()
        given = name if mapping else repr(f"{tag}={rate}")
        out[name] = read_rate(str(rate), option_value(option, given))
    return out


def parse_template(
    specs: Iterable[str] | Mapping[str, int],
    *,
    option: str = "degrade_template",
    endpoints: Sequence[Endpoint] | None = None,
) -> dict[str, int]:
    """Parse ``--degrade-template TAG=N`` options into ``{tag: tokens}``: the endpoint renders
    a different chat template, so it counts (and bills) ``tokens`` more prompt tokens per request
    (fewer when negative; never below one). A mapping passes through, its counts checked; with
    ``endpoints``, a tag that matches none of them is refused (``check_tags``)."""
    out: dict[str, int] = {}
    for name, tokens in tag_values(specs, option=option, form="TAG=N (e.g. fireworks=12)"):
        text = str(tokens).strip()
        try:
            count = int(text)
        except ValueError:
            raise ConfigError(
                refused_at(
                    option_value(option, f"{name}={text}"),
                    "N must be a whole number of prompt tokens (e.g. 12)",
                )
            ) from None
        out[str(name).strip()] = count
    if endpoints is not None:
        check_tags(((option_value(option, f"{tag}={n}"), tag) for tag, n in out.items()), endpoints)
    return out


def template_tokens(table: Mapping[str, int], endpoint: Endpoint, prompt_tokens: int) -> int:
    """The prompt tokens ``endpoint`` counts for a request of ``prompt_tokens``: more (or fewer,
    never below one) where ``table`` (``parse_template``'s; the first matching entry) gives it
    another template."""
    if not table:
        return prompt_tokens
    extra = next((n for tag, n in table.items() if matches(tag, endpoint)), 0)
    return max(1, prompt_tokens + extra)


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
            parse_degrade(degrade or {}),
            parse_degrade(flip or {}, option="degrade_flip"),
            parse_degrade(tools or {}, option="degrade_tools"),
            read_rate(str(noise), Message("fake-option", "{noise:bare}")),
            read_rate(str(hard), Message("fake-option", "{hard:bare}")),
        )
        for option, rates in (
            ("degrade", out.degrade),
            ("degrade_flip", out.flip),
            ("degrade_tools", out.tools),
        ):
            check_tags(
                ((option_value(option, f"{tag}={rate:g}"), tag) for tag, rate in rates.items()),
                endpoints,
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
        out.active = bool(out) or out.noise > 0
        return out

    def __bool__(self) -> bool:
        return bool(self.degrade or self.flip or self.tools)

    def change(
        self, answer: Answer, endpoint: Endpoint, key: tuple[object, ...], noise_draw: float
    ) -> Answer:
        """``answer`` as ``endpoint`` gives it: its degradations (seeded by ``key``: the same
        request degrades the same way), then the noise every endpoint has (``noise_draw``: the
        request's own draw in [0, 1))."""
        if self:
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
            rates = tuple(  # type: ignore[assignment]
                next((r for tag, r in table.items() if matches(tag, endpoint)), 0.0)
                for table in (self.degrade, self.flip, self.tools)
            )
            assert rates is not None
            self._cache[endpoint.tag] = rates
        return rates
