"""Pinned requests: the ``provider`` block that pins a request to one endpoint, and its body.

The routing model must confirm each pin admits its endpoint and nothing else; a response served by
another provider is a leaked pin (``pin_leaked``). ``docs/verify.md``, "Pinning and request
settings".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError, OptionError, braced
from openrouter_probe.rules.routing import RequestParams, route
from openrouter_probe.verify.suites import Item

__all__ = [
    "DEFAULT_REASONING",
    "DEFAULT_SEED",
    "DEFAULT_TOP_LOGPROBS",
    "default_reference",
    "pin",
    "pin_block",
    "pin_leaked",
    "pin_tags",
    "request_body",
    "resolve_tag",
    "tag_order",
]

#: The sampling seed sent to endpoints that list ``seed`` (temperature is 0 anyway).
DEFAULT_SEED = 20260127
#: Reasoning off by default: the first generated token is then the answer's first token (the one
#: place where logprobs compare like for like), and the answers are short and cheap.
DEFAULT_REASONING: dict[str, Any] = {"effort": "none"}
#: Top-k logprobs asked from endpoints that list ``logprobs`` and ``top_logprobs``.
DEFAULT_TOP_LOGPROBS = 5


def pin_block(tag: str) -> dict[str, Any]:
    """Return the ``provider`` block that pins a request to the endpoint ``tag``."""
    return {"only": [tag], "allow_fallbacks": False}


def pin(
    tag: str, endpoints: Sequence[Endpoint], *, params: RequestParams | None = None
) -> Endpoint:
    """Return the one endpoint ``pin_block(tag)`` admits, as the routing model decides.

    Raises ``ConfigError`` when the pin admits nothing (with the routing model's reason) or more than
    one endpoint (name the full tag instead).
    """
    decision = route(pin_block(tag), endpoints, params)
    if decision.admitted_tags == [tag]:
        return decision.admitted[0]
    if not decision.admitted:
        why = decision.exclusion(tag)
        known = ", ".join(e.tag for e in endpoints)
        detail = why.detail if why is not None else f"no endpoint has tag {tag!r} (tags: {known})"
        raise ConfigError(f"pin {tag!r} admits no endpoint: {detail}")
    raise ConfigError(
        f"pin {tag!r} admits {len(decision.admitted)} endpoints ({', '.join(decision.admitted_tags)}); "
        "name one full tag"
    )


def resolve_tag(tag: str, endpoints: Sequence[Endpoint], *, option: str = "endpoints") -> str:
    """Return the full tag ``tag`` names: itself when an endpoint has it, else the one endpoint
    whose base slug it is (``chutes`` -> ``chutes/int4``). Several endpoints of that slug are an
    error listing them; no endpoint is left for ``pin`` to explain."""
    if any(e.tag == tag for e in endpoints):
        return tag
    found = [e.tag for e in endpoints if e.tag.partition("/")[0] == tag]
    if len(found) > 1:
        listed = braced(", ".join(found))
        raise OptionError(
            f"{{{option}=}}: {len(found)} endpoints have that slug ({listed}); name one full tag",
            **{option: tag},
        )
    return found[0] if found else tag


def pin_leaked(provider: str | None, endpoint: Endpoint) -> bool:
    """Whether a response served by ``provider`` (its display name) escaped the pin to ``endpoint``.

    A response that names no provider cannot be attributed, so it counts as leaked too.
    """
    return provider != endpoint.provider_name


def default_reference(model: str, endpoints: Sequence[Endpoint]) -> str | None:
    """Return the first party's tag: the endpoint whose slug is the model's author
    (``moonshotai/kimi-k2.5`` -> ``moonshotai/int4``), when there is exactly one."""
    author = model.split("/", 1)[0].lower()
    tags = [e.tag for e in endpoints if e.slug == author]
    return tags[0] if len(tags) == 1 else None


def request_body(
    item: Item,
    endpoint: Endpoint,
    *,
    model: str,
    seed: int = DEFAULT_SEED,
    reasoning: Mapping[str, Any] | None = None,
    top_logprobs: int = DEFAULT_TOP_LOGPROBS,
    room: int = 0,
) -> dict[str, Any]:
    """Return the chat request body for ``item`` pinned to ``endpoint``.

    ``reasoning`` defaults to ``DEFAULT_REASONING`` and is sent as given to every endpoint (an
    empty one is not sent: the model's default); ``max_tokens`` is the item's plus ``room`` (the
    reasoning room, ``verify.thinking``); ``seed`` and ``logprobs``/``top_logprobs`` (when
    ``top_logprobs`` > 0) only where the endpoint lists them.
    """
    supported = set(endpoint.supported_parameters)
    body: dict[str, Any] = {
        "model": model,
        "messages": [dict(m) for m in item.messages],
        "provider": pin_block(endpoint.tag),
        "temperature": 0,
        "max_tokens": item.max_tokens + room,
        "reasoning": dict(DEFAULT_REASONING if reasoning is None else reasoning),
    }
    if not body["reasoning"]:
        del body["reasoning"]
    if "seed" in supported:
        body["seed"] = seed
    if item.tools:
        body["tools"] = [dict(t) for t in item.tools]
        body["tool_choice"] = "auto"
    if top_logprobs > 0 and {"logprobs", "top_logprobs"} <= supported:
        body["logprobs"] = True
        body["top_logprobs"] = top_logprobs
    return body


def pin_tags(
    order: Sequence[str],
    endpoints: Sequence[Endpoint],
    params: RequestParams,
    *,
    reference: str | None,
) -> dict[str, Endpoint]:
    """The endpoint each tag pins (``pin``); every tag that pins none is named at once, with
    why, under the option that gave it (review of 0.3: only the first was, as "pin 'x'")."""
    pinned: dict[str, Endpoint] = {}
    refused: list[tuple[str, str]] = []
    for tag in order:
        try:
            pinned[tag] = pin(tag, endpoints, params=params)
        except ConfigError as exc:
            reason = str(exc).removeprefix(f"pin {tag!r} ")
            refused.append((tag, reason.split(" (tags: ")[0]))
    if not refused:
        return pinned

    by_option: dict[str, list[tuple[str, str]]] = {}
    for tag, why in refused:  # each tag under the option that gave it
        option = "reference" if reference and tag == order[0] else "endpoints"
        by_option.setdefault(option, []).append((tag, why))
    parts = [
        f"{{{option}=}}: " + braced("; ".join(f"{tag!r} {why}" for tag, why in found))
        for option, found in by_option.items()
    ]
    known = braced(", ".join(e.tag for e in endpoints))
    raise OptionError(
        "; ".join(parts) + f"; the model's tags: {known}",
        **{option: ",".join(tag for tag, _ in found) for option, found in by_option.items()},
    )


def tag_order(
    model: str, endpoints: Sequence[Endpoint], tags: Sequence[str], reference: str | None
) -> list[str]:
    """The reference's full tag, then the other endpoints' (a slug with one endpoint resolved)."""
    ref = (
        resolve_tag(reference, endpoints, option="reference")
        if reference
        else default_reference(model, endpoints)
    )
    if ref is None:
        raise ConfigError(
            f"no first-party endpoint found for {model}; name the reference endpoint's tag"
        )
    resolved = [resolve_tag(t, endpoints) for t in tags]
    order = [ref, *(t for t in dict.fromkeys(resolved) if t != ref)]
    if len(order) < 2:
        raise ConfigError("nothing to compare: give at least one endpoint besides the reference")
    return order
