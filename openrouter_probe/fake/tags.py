"""The fake's ``TAG=VALUE`` options read and checked (``fake.faults``, ``fake.degrade``,
``fake.sampling``): where a value was given, a rate between 0 and 1, a tag that matches no served
endpoint (then a fault or a degradation could never strike)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.rules.routing import matches

__all__ = ["check_tags", "option_value", "read_rate", "refused_at", "tag_values"]


def option_value(option: str, given: str) -> Message:
    """Where a value was given: the option (a keyword: ``degrade_flip``; the CLI says its flag)
    and the value as given."""
    return Message("fake-option", "{" + option + ":bare} {given:s}", given=given)


def refused_at(where: object, template: str, **values: object) -> Message:
    """``where``: then what is wrong with it (``template`` with its ``values``)."""
    return Message("fake-option-refused", "{where:s}: " + template, where=where, **values)


def read_rate(text: str, where: object) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(
            refused_at(where, "rate {text:s} is not a number between 0 and 1", text=repr(text))
        ) from None
    if not 0.0 <= value <= 1.0:
        raise ConfigError(
            refused_at(where, "rate {value:s} must be between 0 and 1", value=str(value))
        )
    return value


def tag_values(
    specs: Iterable[str] | Mapping[str, object], *, option: str, form: str
) -> list[tuple[object, object]]:
    """``(tag, value)`` of each ``TAG=VALUE`` option (a mapping's items as they are); a spec
    without ``=`` or a tag is refused, naming the ``form`` expected."""
    if isinstance(specs, Mapping):
        return list(specs.items())
    pairs: list[tuple[object, object]] = []
    for spec in specs:
        tag, sep, value = spec.partition("=")
        if not sep or not tag.strip():
            raise ConfigError(refused_at(option_value(option, repr(spec)), "expected " + form))
        pairs.append((tag, value))
    return pairs


def check_tags(pairs: Iterable[tuple[object, str]], endpoints: Sequence[Endpoint]) -> None:
    """Raise ``ConfigError`` for the first ``(where, tag)`` that matches no endpoint (a fault or a
    degradation that could never strike), listing the tags and slugs that would."""
    for where, tag in pairs:
        if not any(matches(tag, e) for e in endpoints):
            tags = ", ".join(sorted({e.tag for e in endpoints}))
            slugs = ", ".join(sorted({e.slug for e in endpoints}))
            raise ConfigError(
                refused_at(
                    where,
                    "no endpoint matches {tag:s}; use a tag ({tags:s}) or a provider slug "
                    "({slugs:s})",
                    tag=repr(tag),
                    tags=tags,
                    slugs=slugs,
                )
            )
