"""An endpoint that samples hotter: ``--degrade-sampling TAG=FACTOR``.

The fake's answers at a temperature come from the sampling model in ``rules.sampling_model``.
``--degrade-sampling TAG=FACTOR`` makes an endpoint sample at ``FACTOR`` times the temperature it
was asked for (a provider that ignores or rescales ``temperature``): its greedy answers, and so
every temperature-0 test, are unchanged; only the distribution of its samples moves. The sampled
arm of ``verify`` (``verify.sampled``) is the test that can see it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake.tags import check_tags, option_value, refused_at, tag_values
from openrouter_probe.rules.routing import matches

__all__ = ["parse_sampling", "sampling_factor"]


def parse_sampling(
    specs: Iterable[str] | Mapping[str, float],
    *,
    option: str = "degrade_sampling",
    endpoints: Sequence[Endpoint] | None = None,
) -> dict[str, float]:
    """Parse ``--degrade-sampling TAG=FACTOR`` options into ``{tag: factor}`` (a mapping passes
    through, checked): the endpoint samples at ``FACTOR`` times the asked temperature. With
    ``endpoints``, a tag that matches none of them is refused (``check_tags``)."""
    out: dict[str, float] = {}
    form = "TAG=FACTOR (e.g. chutes/int4=1.3)"
    for name, factor in tag_values(specs, option=option, form=form):
        text = str(factor).strip()
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(
                refused_at(
                    option_value(option, f"{name}={text}"),
                    "FACTOR must be a number above 0 (e.g. 1.3: 30% hotter)",
                )
            )
        out[str(name).strip()] = value
    if endpoints is not None:
        check_tags(
            ((option_value(option, f"{tag}={f:g}"), tag) for tag, f in out.items()), endpoints
        )
    return out


def sampling_factor(table: Mapping[str, float], endpoint: Endpoint) -> float:
    """The factor ``endpoint`` scales temperatures by (1: as asked; the first matching entry)."""
    return next((f for tag, f in table.items() if matches(tag, endpoint)), 1.0)
