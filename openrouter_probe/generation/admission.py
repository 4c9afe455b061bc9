"""``generate``'s start-up check: the policy against the endpoints serving its model now.

Before anything is sent: the model's endpoints now (``model_endpoints``), the rows no admitted
endpoint can serve (too long for every context, an image the model cannot take) taken out
(``skip_unservable``), the worst-case prices of what the policy admits for any request of the run
(``admitted_prices``, the cap's prices), and in batch mode the batch sender's settings from the
policy's batch block (``batch_settings``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import Message, NoRouteError, PolicyError
from openrouter_probe.generation.plan import GeneratePlan
from openrouter_probe.generation.prompts import PromptSet
from openrouter_probe.run.checks import endpoints_now
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.start import Said

__all__ = ["admitted_prices", "batch_settings", "model_endpoints", "skip_unservable"]

log = logging.getLogger(__name__)


async def model_endpoints(model: str, asked: GeneratePlan) -> tuple[list[Any], Any]:
    """The model's endpoints now; a model OpenRouter does not know names the policy it came from."""
    try:
        # the sync client runs in a thread: the event loop (a notebook's, a test server's) goes on
        return await asyncio.to_thread(endpoints_now, model, asked.snapshot, asked.run.connection)
    except NoRouteError as exc:
        raise PolicyError(
            f"its model: {exc.message.rstrip('.')}; fix `model` in the policy's spec and "
            "re-compile it",
            source=str(asked.policy),
        ) from exc


def skip_unservable(
    rows: PromptSet, endpoints: list[Endpoint], snap: Any, compiled: Any, asked: GeneratePlan
) -> None:
    """Take the rows no admitted endpoint can serve out of ``rows``: skipped with their line and
    why (one line), counted; the others go. A row holding an image when the snapshot lists the
    model's input modalities without ``image``; or a row whose prompt and ``max_tokens`` are
    longer than the context of every endpoint the policy admits for it (OpenRouter's routing
    drops such an endpoint: ``rules.routing``'s ``context_length`` step). The prompt's tokens are
    estimated as the fake server counts them (``rules.prompt_tokens``), not by the provider's
    tokenizer: a row near the limit may still be refused upstream (a final 400 for that row). A
    row is measured only when its bytes could exceed the context (bytes bound tokens from
    above). Rows whose parameters no endpoint admits at all are the start-up check's to say."""
    from openrouter_probe.rules import prompt_tokens
    from openrouter_probe.rules.routing import RequestParams, route

    architecture = getattr(getattr(snap, "parsed", None), "architecture", None)
    modalities = list(getattr(architecture, "input_modalities", None) or ()) or None
    asked_params = frozenset(asked.parameters)
    largest: dict[tuple[int, frozenset[str]], int | None] = {}
    why: dict[str, str] = {}
    for row in rows.rows:
        if modalities is not None and "image" not in modalities and _has_image(row):
            takes = ", ".join(modalities)
            why[row.id] = (
                f"holds an image; {compiled.model} takes {takes} input only (the snapshot)"
            )
            continue
        row_max = int(row.params.get("max_tokens", asked.max_tokens))
        key = (row_max, asked_params | frozenset(row.params))
        if key not in largest:
            params = RequestParams(max_tokens=row_max, parameters=key[1])
            admitted = route(compiled.provider, endpoints, params).admitted
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
        why[row.id] = Message(
            "row-past-context",
            "its prompt is about {tokens:,} tokens: with {max_tokens=} it is longer than "
            "the context of every endpoint admitted ({context:,} at most); {fix:s}",
            tokens=tokens,
            max_tokens=row_max,
            context=context,
            fix=fix,
        )
    if why:
        rows.drop(why)


def _has_image(row: PromptRow) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(isinstance(p, dict) and p.get("type") == "image_url" for p in m["content"])
        for m in row.messages
    )


def admitted_prices(
    compiled: Any, endpoints: list[Endpoint], asked: GeneratePlan
) -> tuple[Prices, Said]:
    """The start-up check: the policy against the endpoints serving the model now; return the
    worst-case prices of what it admits for any request of the run (the cap's prices: a row with
    its own ``max_tokens`` or parameters may be routed where the run's own parameters are not),
    and the warnings of its ``provider.order`` that no endpoint matches."""
    from openrouter_probe.policy.lint import lint_block
    from openrouter_probe.rules.routing import RequestParams, route

    decision = route(
        compiled.provider,
        endpoints,
        RequestParams(max_tokens=asked.max_tokens, parameters=_sent_parameters(compiled, asked)),
    )
    if not decision.admitted:
        raise PolicyError(_admits_none(compiled, endpoints, asked), source=str(asked.policy))
    warnings = tuple(
        f"{asked.policy}: {finding.loc}: {finding.message}"
        for finding in lint_block(compiled.provider, endpoints)
        if finding.loc.startswith("provider.order")
        and finding.code in ("no-match", "order-excluded")
    )
    anything = route(compiled.provider, endpoints, RequestParams())
    try:
        return Prices.worst_case(anything.admitted), Said(warnings=warnings)
    except ValueError as exc:
        raise PolicyError(f"{exc}; the spend cap needs prices", source=str(asked.policy)) from exc


def _sent_parameters(compiled: Any, asked: GeneratePlan) -> frozenset[str]:
    """The parameters every request sends: the run's, and the sampling its model card fixes
    (``require_parameters`` routes only to endpoints that take them all)."""
    from openrouter_probe.rules.sampling import sampling_advice

    advice = sampling_advice(compiled.model)
    return frozenset(asked.parameters) | frozenset(advice.names if advice is not None else ())


def _admits_none(compiled: Any, endpoints: list[Endpoint], asked: GeneratePlan) -> Message:
    """Why no endpoint would serve the run's requests, pointing at the fix: a ``max_tokens``
    above the output limit of every endpoint the policy admits is lowered, not re-compiled."""
    from openrouter_probe.rules.routing import RequestParams, route

    head = f"admits none of the {len(endpoints)} endpoints serving {compiled.model} now"
    params = _sent_parameters(compiled, asked)
    loose = route(compiled.provider, endpoints, RequestParams(parameters=params)).admitted
    limits = [e.max_completion_tokens for e in loose]
    if loose and None not in limits:
        largest = max(limit for limit in limits if limit is not None)
        fits = route(
            compiled.provider, endpoints, RequestParams(max_tokens=largest, parameters=params)
        )
        if fits.admitted:
            takers = ", ".join(e.tag for e in fits.admitted)
            lower = Message("lower-to", "{max_tokens=}", max_tokens=largest)
            return Message(
                "max-tokens-over-limits",
                "{head:s} with {max_tokens=}: above the output limit of each of the {count:d} it "
                "admits. Lower it to {lower:s} or less, the largest they take ({takers:s})",
                head=head,
                max_tokens=asked.max_tokens,
                count=len(loose),
                lower=lower,
                takers=takers,
            )
    return Message(
        "admits-none",
        "{head:s} (with {max_tokens=}); every request would fail with 404. Re-compile the policy "
        "against a fresh snapshot ({@recompile_fresh})",
        head=head,
        max_tokens=asked.max_tokens,
    )


def _batch_listing(snap: Any, model: str, options: RunPlan) -> list[Endpoint]:
    """The model's ``:batch`` endpoints: the snapshot's, or (a live one without them) asked now
    (``rules.probing.batch_listing``); empty when unknown."""
    if snap is not None and snap.batch is not None:
        return list(snap.batch_endpoints)
    if snap is not None and snap.source != "api":
        return []
    from openrouter_probe.api.client import Client
    from openrouter_probe.rules.probing import batch_listing

    with Client(connection=options.connection) as client:
        listing = batch_listing(client, model)
    return [] if listing is None else listing.endpoints


def batch_settings(compiled: Any, snap: Any, prices: Prices, asked: GeneratePlan) -> Any:
    """The batch sender's settings: the policy's batch block and the ``:batch`` row's prices
    (the sync ones, which are higher, where the listing is unknown); ``None``: a sync run."""
    if asked.batch is None:
        return None
    from openrouter_probe.run.send.batch_plan import BatchSettings

    provider = compiled.batch_provider()
    if provider is None or not provider.get("only"):
        note = (compiled.batch or {}).get("note") or "no :batch endpoint admitted"
        raise PolicyError(
            Message(
                "batch-block-empty",
                "{batch=True}: the policy's batch block names no endpoint ({note:s}); run "
                "without {batch}, or re-compile the policy from a snapshot that lists one",
                note=str(note),
            ),
            source=str(asked.policy),
        )
    batch_prices = prices
    listed = _batch_listing(snap, compiled.model, asked.run)
    chosen = [e for e in listed if e.tag in provider["only"]]
    if chosen:
        batch_prices = Prices.worst_case(chosen)
    else:
        log.warning(
            Message(
                "batch-price-unknown",
                "{batch=True}: no :batch price known for {tags:s}; each batch is reserved at the "
                "sync price",
                tags=", ".join(provider["only"]),
            )
        )
    return BatchSettings(
        model=compiled.model,
        provider=dict(provider),
        prices=batch_prices,
        size=asked.batch.size,
        live=asked.batch.live,
        poll_s=asked.batch.poll_s,
        poll_max_s=max(120.0, asked.batch.poll_s),
        abandon=asked.batch.abandon,
        **_batch_history(asked.snapshot, snap),
    )


def _batch_history(snapshot: Any, snap: Any) -> dict[str, Any]:
    """Where the run records its accepted submits: the snapshot file it was given (a path), or
    nowhere, with why when the user would look for it there (the bundled snapshot)."""
    if isinstance(snapshot, str | Path) and snapshot != "bundled":
        return {"history": Path(snapshot)}
    if snapshot == "bundled" or getattr(snap, "source", None) == "bundled":
        return {
            "history_off": Message(
                "batch-history-off",
                "the bundled snapshot (package data) does not record it: save one "
                "({@save_snapshot}) and pass {snapshot=PATH} to keep a batch history",
            )
        }
    return {}  # a live probe, or a Snapshot object: no file to record it in
