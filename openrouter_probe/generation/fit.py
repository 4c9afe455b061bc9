"""Fit: the rows no admitted endpoint can serve, each named with why, so that the others go.

A row cannot be served when

- its prompt and its ``max_tokens`` are longer than the context of every endpoint the policy
  admits for it (OpenRouter's routing drops an endpoint whose ``context_length`` is below the
  request's prompt tokens plus its ``max_tokens``: ``rules.routing``'s ``context_length`` step); or
- it holds an image and the model takes no image input (the snapshot's
  ``architecture.input_modalities``; unknown modalities: the row goes).

The prompt's tokens are estimated as the fake server counts them (``rules.prompt_tokens``): an
estimate, not the provider's tokenizer, so a row near the limit may still be refused upstream (a
final 400 for that row: the run goes on). A row is measured only when its bytes could exceed the
context (bytes bound tokens from above), so the check is cheap.

Example::

    from openrouter_probe.generation.fit import unservable

    for row, why in unservable(rows, endpoints=endpoints, provider=block, parameters={"max_tokens"},
                               max_tokens=4096, input_modalities=["text"]):
        print(row.id, why)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import Message
from openrouter_probe.rules import prompt_tokens
from openrouter_probe.rules.routing import RequestParams, route
from openrouter_probe.run.rows import PromptRow

__all__ = ["input_modalities", "unservable"]


def input_modalities(snap: Any) -> list[str] | None:
    """The model's input modalities as the snapshot lists them (``None``: not listed)."""
    architecture = getattr(getattr(snap, "parsed", None), "architecture", None)
    listed = getattr(architecture, "input_modalities", None)
    return list(listed) if listed else None


def _has_image(row: PromptRow) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(isinstance(p, dict) and p.get("type") == "image_url" for p in m["content"])
        for m in row.messages
    )


def unservable(
    rows: Iterable[PromptRow],
    *,
    endpoints: Sequence[Endpoint],
    provider: Any,
    parameters: Iterable[str],
    max_tokens: int,
    input_modalities: list[str] | None = None,
    model: str = "the model",
) -> list[tuple[PromptRow, str]]:
    """The rows no endpoint the policy admits can serve, each with why (one line). Rows whose
    parameters no endpoint admits at all are not named here (that is the policy's problem, which
    the start-up check says)."""
    asked = frozenset(parameters)
    largest: dict[tuple[int, frozenset[str]], int | None] = {}
    out: list[tuple[PromptRow, str]] = []
    for row in rows:
        if input_modalities is not None and "image" not in input_modalities and _has_image(row):
            takes = ", ".join(input_modalities)
            out.append((row, f"holds an image; {model} takes {takes} input only (the snapshot)"))
            continue
        row_max = int(row.params.get("max_tokens", max_tokens))
        key = (row_max, asked | frozenset(row.params))
        if key not in largest:
            admitted = route(provider, endpoints, RequestParams(max_tokens=row_max,
                                                                parameters=key[1])).admitted  # fmt: skip
            contexts = [e.context_length for e in admitted]
            largest[key] = (
                None
                if not contexts or None in contexts
                else max(c for c in contexts if c is not None)
            )
        context = largest[key]
        if context is None:
            continue
        sent = len(json.dumps([row.params.get(k) for k in prompt_tokens.PROMPT_FIELDS]))
        bound = prompt_tokens.prompt_tokens_bound(row.prompt_size + sent, len(row.messages))
        if bound + row_max <= context:
            continue  # a token is at least a byte: it fits
        tokens = prompt_tokens.estimate_prompt_tokens(row.messages, row.params)
        if tokens + row_max <= context:
            continue
        room = context - tokens
        fix = f"shorten it, or lower max_tokens to {room}" if room >= 1 else "shorten it"
        out.append(
            (
                row,
                Message(
                    "row-past-context",
                    "its prompt is about {tokens:,} tokens: with {max_tokens=} it is longer than "
                    "the context of every endpoint admitted ({context:,} at most); {fix:s}",
                    tokens=tokens,
                    max_tokens=row_max,
                    context=context,
                    fix=fix,
                ),
            )
        )
    return out
