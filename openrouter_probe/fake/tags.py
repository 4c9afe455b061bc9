"""The fake's ``TAG=VALUE`` options read and checked (``fake.faults``, ``fake.degrade``): where a
value was given, a rate between 0 and 1, a tag that matches no served endpoint (then a fault or a
degradation could never strike)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.rules.routing import matches

__all__ = [
    "check_tags",
    "first_match",
    "option_value",
    "parse_tagged",
    "read_rate",
    "refused_at",
]

T = TypeVar("T")


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


def parse_tagged(
    specs: Iterable[str] | Mapping[str, object],
    *,
    option: str,
    form: str,
    read: Callable[[str, Message], T],
    endpoints: Sequence[Endpoint] | None = None,
) -> dict[str, T]:
    """``{tag: value}`` of ``TAG=VALUE`` options (a mapping's items as they are), each value read
    by ``read`` (its text, and where it was given for the error). A spec without ``=`` or a tag is
    refused, naming the ``form`` expected; with ``endpoints``, so is a tag that matches none."""
    if isinstance(specs, Mapping):
        pairs = [(str(tag), str(value)) for tag, value in specs.items()]
    else:
        pairs = []
        for spec in specs:
            tag, sep, value = spec.partition("=")
            if not sep or not tag.strip():
                raise ConfigError(refused_at(option_value(option, repr(spec)), "expected " + form))
            pairs.append((tag, value))
    out: dict[str, T] = {}
    given: dict[str, Message] = {}
    for tag, value in pairs:
        name, text = tag.strip(), value.strip()
        given[name] = option_value(option, f"{name}={text}")
        out[name] = read(text, given[name])
    if endpoints is not None:
        check_tags(((where, tag) for tag, where in given.items()), endpoints)
    return out


def first_match(table: Mapping[str, T], endpoint: Endpoint, default: T) -> T:
    """The value of ``table``'s first entry whose tag or slug matches ``endpoint``."""
    return next((value for tag, value in table.items() if matches(tag, endpoint)), default)


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
