"""The spend cap: reserve each request's worst case before sending, settle to its real cost after.

A request may be sent only while ``spent + reserved + its worst case <= cap``. Its worst case
(``Prices.worst_case`` of its ``RequestShape``) counts the whole request at the highest prices
among every endpoint the policy admits, whatever a row's own parameters: what it counts is in
docs/generate.md, "What the cap guarantees". When the answer returns, the reservation is released
and its cost added to ``spent``; a cost that cannot be read is its whole reservation until
``/generation`` settles it (``give_back``). Concurrency shrinks by itself as the money runs out, and
the cap is never crossed as long as no answer costs more than its worst case.

Prompt tokens are not known before the provider's tokenizer counts them: the bound
(``rules.prompt_tokens.prompt_tokens_bound``) is every byte the request sends beside the run's
fixed prefix plus a chat-template allowance per message (a BPE token is never shorter than one
byte, whatever the tokenizer). A web search adds its results to the prompt: such a request counts
the largest context an admitted endpoint takes.

Datasets share the money (``shares``): the cap is split into per-dataset sub-caps by weight (equal by
default, as the budget planner plans), and what a finished dataset leaves is lent to the others.

Money is ``Decimal`` (``usage.cost`` has eight decimals; floats would drift over 100k requests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Any, NamedTuple

from openrouter_probe.api.jsontext import mappings_in
from openrouter_probe.api.schema import Endpoint
from openrouter_probe.rules.prompt_tokens import prompt_tokens_bound
from openrouter_probe.rules.server_tools import RESULT_USD, server_tools

__all__ = [
    "Prices",
    "RequestShape",
    "SpendCap",
    "allocate",
    "request_shape",
]

#: Results a web search returns when the plugin does not say (OpenRouter's default ``max_results``).
DEFAULT_WEB_RESULTS = 5
_ZERO = Decimal(0)
_IMAGE_PARTS = frozenset({"image_url", "input_image", "image"})


class RequestShape(NamedTuple):
    """What a request may be billed for besides its output: prompt tokens (a bound), images, web
    searches, and whether it writes a prompt cache. (A tuple: one is made per row.)"""

    prompt_tokens: int
    images: int = 0
    web_searches: int = 0
    cache_write: bool = False


def _web_searches(params: Mapping[str, Any]) -> int:
    """Web search results a request may be billed for: the ``web`` plugin's ``max_results``,
    ``web_search_options`` (one), and the ``openrouter:web_search`` server tools' uses times
    their results (``rules.server_tools``)."""
    tools = params.get("tools")
    searches = server_tools(tools).results if isinstance(tools, list) else 0
    for plugin in params.get("plugins") or ():
        if isinstance(plugin, dict) and plugin.get("id") == "web":
            count = plugin.get("max_results")
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                searches += count
            else:
                searches += DEFAULT_WEB_RESULTS
    if params.get("web_search_options") is not None:
        searches += 1
    return searches


def request_shape(
    sent_bytes: int, messages: list[Any], params: Mapping[str, Any] | None = None
) -> RequestShape:
    """The shape of a request whose own part (everything but the run's model, provider block and
    ``stream``) is ``sent_bytes`` long: its prompt bound, images, web searches and cache writes.

    ``params`` are the row's parameters besides ``messages`` (``plugins``, ``tools``, ...).
    """
    bound = prompt_tokens_bound(sent_bytes, len(messages))
    if not params:
        for message in messages:  # (a loop, not all(): this runs for every row)
            if (
                type(message) is not dict
                or type(message.get("content")) is not str
                or "cache_control" in message
            ):
                break
        else:
            return RequestShape(bound)  # plain text messages: nothing else to bill
    params = params or {}
    images = 0
    cache_write = False
    for part in mappings_in([messages, params]):
        kind = part.get("type")  # a tool's JSON Schema may name a property "type"
        if isinstance(kind, str) and kind in _IMAGE_PARTS:
            images += 1
        if "cache_control" in part:
            cache_write = True
    tools = params.get("tools")
    extra = server_tools(tools).prompt_tokens if isinstance(tools, list) else 0
    return RequestShape(
        prompt_tokens=bound + extra,
        images=images,
        web_searches=_web_searches(params),
        cache_write=cache_write,
    )


@dataclass(frozen=True)
class Prices:
    """The highest prices among the admitted endpoints, in USD per token (per request, image or
    search where the name says so): what a request may cost at worst wherever it is routed.
    ``context_tokens`` is the largest context of those endpoints (``None``: unknown)."""

    input_usd_per_token: Decimal
    output_usd_per_token: Decimal
    request_usd: Decimal = _ZERO
    image_usd: Decimal = _ZERO
    web_search_usd: Decimal = _ZERO
    cache_write_usd_per_token: Decimal = _ZERO
    context_tokens: int | None = None

    def worst_case_usd(
        self, *, prompt_tokens: int, max_tokens: int, shape: RequestShape | None = None
    ) -> Decimal:
        """Return the most a request can cost: ``prompt_tokens`` and ``max_tokens`` at the highest
        prices, plus what ``shape`` adds (images, searches, a cache write)."""
        input_price = self.input_usd_per_token
        extra = self.request_usd
        if shape is not None and not (shape.images or shape.web_searches or shape.cache_write):
            # the common request, text alone: the sum below with no image and no search, made
            # once (the same value, to the same exponent)
            extra = self._text_extra_usd
        elif shape is not None:
            if shape.cache_write:
                input_price = max(input_price, self.cache_write_usd_per_token)
            if shape.web_searches and self.context_tokens:
                # the search results are added to the prompt: up to the whole context
                prompt_tokens = max(prompt_tokens, self.context_tokens)
            # a result costs the endpoint's own search price or OpenRouter's engine's (Exa's, in
            # ``usage.cost`` whatever the endpoint lists), whichever is dearer
            per_result = max(self.web_search_usd, RESULT_USD)
            extra += shape.images * self.image_usd + shape.web_searches * per_result
        return prompt_tokens * input_price + max_tokens * self.output_usd_per_token + extra

    @cached_property
    def _text_extra_usd(self) -> Decimal:
        """What ``worst_case_usd`` adds to a request with no image, search or cache write."""
        return self.request_usd + (0 * self.image_usd + 0 * max(self.web_search_usd, RESULT_USD))

    def max_tokens_within(
        self, budget_usd: Decimal, *, prompt_tokens: int, shape: RequestShape | None = None
    ) -> int:
        """The largest ``max_tokens`` whose worst case fits in ``budget_usd`` (0: none does)."""
        fixed = self.worst_case_usd(prompt_tokens=prompt_tokens, max_tokens=0, shape=shape)
        left = budget_usd - fixed
        if left < 0:
            return 0
        if self.output_usd_per_token <= 0:
            return 2**31 - 1
        return int(left / self.output_usd_per_token)

    @classmethod
    def worst_case(cls, endpoints: Iterable[Endpoint]) -> Prices:
        """Return the highest prices of ``endpoints`` (give every endpoint the policy admits for
        any request of the run), overrides included: input, output (reasoning included), per
        request, per image, per web search, cache write; and their largest context.

        An admitted endpoint with no listed output price makes the worst case unknowable: that is
        a ``ValueError`` for the caller to turn into a clear message.
        """
        found: dict[str, list[Decimal]] = {
            key: []
            for key in ("prompt", "out", "request", "image", "web_search", "input_cache_write")
        }
        contexts = []
        for e in endpoints:
            out = _prices(e, "completion") + _prices(e, "internal_reasoning")
            if not out:
                raise ValueError(f"{e.tag} lists no output price: the worst case cannot be bounded")
            found["out"].extend(out)
            for key in ("prompt", "request", "image", "web_search", "input_cache_write"):
                found[key].extend(_prices(e, key))
            if e.context_length:
                contexts.append(e.context_length)
        if not found["out"]:
            raise ValueError("no admitted endpoint: nothing to price")
        top = {key: max(values, default=_ZERO) for key, values in found.items()}
        return cls(
            input_usd_per_token=top["prompt"],
            output_usd_per_token=top["out"],
            request_usd=top["request"],
            image_usd=top["image"],
            web_search_usd=top["web_search"],
            cache_write_usd_per_token=top["input_cache_write"],
            context_tokens=max(contexts, default=None),
        )


def _prices(endpoint: Endpoint, key: str) -> list[Decimal]:
    """The price under ``key`` and under every conditional override (prompt size, time window)."""
    found = []
    base = endpoint.pricing.usd_per_unit(key)
    if base is not None:
        found.append(base)
    discount = Decimal(str(endpoint.pricing.discount or 0))
    for override in endpoint.pricing.overrides or []:
        raw = (override.model_extra or {}).get(key)
        if raw is None:
            continue
        try:
            value = Decimal(str(raw))
        except ArithmeticError:
            continue
        # a negative price means "variable" (routers list -1): not a price
        if value.is_finite() and not value.is_signed():
            found.append(value * (1 - discount))
    return found


class SpendCap:
    """Money spent, money reserved for requests in flight, and the cap they must stay under.

    ``spent_usd`` starts at what earlier runs recorded (resume). All methods are synchronous: in
    one asyncio loop, code between two ``await``s runs without interruption, so ``try_reserve``'s
    check and its reservation can never interleave with another worker's, and no lock is needed.
    Keep it that way: never put an ``await`` inside these methods.

    ``shares`` splits the cap between datasets by weight: a dataset's sub-cap is the money not
    committed to closed datasets, times its weight over the weights of the open ones. ``close``
    (a dataset that will send nothing more) lends what it leaves to the others.
    """

    def __init__(
        self,
        cap_usd: Decimal | None,
        *,
        spent_usd: Decimal = _ZERO,
        spent_by_dataset: Mapping[str, Decimal] | None = None,
    ) -> None:
        self.cap_usd = cap_usd
        self.spent_usd = spent_usd
        self.reserved_usd = _ZERO
        #: what OpenRouter holds for the reservations in flight, as the in-flight budget counts
        #: it (``held_usd`` of each: its input and ``max_tokens``; ``run.money.limit.DollarWindow``)
        self.held_usd = _ZERO
        self.in_flight = 0
        self.peak_committed_usd = spent_usd
        self.overruns = 0  # answers that cost more than their reservation (should stay 0)
        self.committed_by_dataset: dict[str, Decimal] = dict(spent_by_dataset or {})
        self._weights: dict[str, Decimal] = {}  # the open datasets that share the cap

    def shares(self, weights: Mapping[str, Decimal | int | float]) -> None:
        """Split the cap between these datasets by weight (each > 0)."""
        for dataset, weight in weights.items():
            value = Decimal(str(weight))
            if value <= 0:
                raise ValueError(f"{dataset}: a weight must be above 0")
            self._weights[dataset] = value
            self.committed_by_dataset.setdefault(dataset, _ZERO)

    def close(self, dataset: str) -> None:
        """``dataset`` will send nothing more: what its sub-cap leaves goes to the others."""
        self._weights.pop(dataset, None)

    @property
    def committed_usd(self) -> Decimal:
        """Spent plus reserved: the most the run can have cost once everything in flight settles."""
        return self.spent_usd + self.reserved_usd

    @property
    def remaining_usd(self) -> Decimal | None:
        """What is left of the cap after what is spent (never below 0)."""
        return None if self.cap_usd is None else max(_ZERO, self.cap_usd - self.spent_usd)

    def share_usd(self, dataset: str) -> Decimal | None:
        """``dataset``'s sub-cap now (``None``: no cap, or the dataset does not share it)."""
        weight = self._weights.get(dataset)
        if self.cap_usd is None or weight is None:
            return None
        pool = self.cap_usd - self.committed_usd
        weights = _ZERO
        for name, share in self._weights.items():
            pool += self.committed_by_dataset[name]  # an open dataset's money is in its share
            weights += share
        return pool * weight / weights

    def fits(
        self, amount_usd: Decimal, dataset: str | None = None, *, borrow: bool = False
    ) -> bool:
        """Whether a reservation of ``amount_usd`` for ``dataset`` would fit now (``borrow``:
        under the cap alone, past the dataset's share: ``run.schedule.queues`` says when it may)."""
        if self.cap_usd is None:
            return True
        if self.committed_usd + amount_usd > self.cap_usd:
            return False
        if dataset is None or borrow or len(self._weights) < 2:
            return True  # one open dataset's share is all the cap leaves: the check above
        share = self.share_usd(dataset)
        return share is None or self.committed_by_dataset[dataset] + amount_usd <= share

    def try_reserve(
        self,
        amount_usd: Decimal,
        dataset: str | None = None,
        *,
        borrow: bool = False,
        held_usd: Decimal = _ZERO,
    ) -> bool:
        """Reserve ``amount_usd`` if it fits under the cap (and the share, unless ``borrow``);
        return whether it did. ``held_usd``: what OpenRouter holds for it (``held_usd``)."""
        # No await between the check and the update (see the class docstring): atomic in asyncio.
        if not self.fits(amount_usd, dataset, borrow=borrow):
            return False
        self.reserved_usd += amount_usd
        self.held_usd += held_usd
        self.in_flight += 1
        if dataset is not None:
            by = self.committed_by_dataset
            by[dataset] = by.get(dataset, _ZERO) + amount_usd
        self.peak_committed_usd = max(self.peak_committed_usd, self.committed_usd)
        return True

    def settle(
        self,
        reserved_usd: Decimal,
        cost_usd: Decimal | None,
        dataset: str | None = None,
        *,
        held_usd: Decimal = _ZERO,
    ) -> None:
        """Release a reservation (and what OpenRouter held for it) and add what the request
        cost (``None``: nothing billed)."""
        self.reserved_usd -= reserved_usd
        self.held_usd -= held_usd
        self.in_flight -= 1
        cost = cost_usd or _ZERO
        if cost > reserved_usd:
            self.overruns += 1
        self.spent_usd += cost
        if dataset is not None:
            by = self.committed_by_dataset
            by[dataset] = by.get(dataset, _ZERO) + cost - reserved_usd

    def add_spent(self, cost_usd: Decimal, dataset: str | None = None) -> None:
        """Add a cost that had no reservation of its own."""
        self.spent_usd += cost_usd
        self._move(dataset, cost_usd)

    def give_back(self, amount_usd: Decimal, dataset: str | None = None) -> None:
        """Take back part of what was counted as spent (a worst case ``/generation`` settled)."""
        self.spent_usd -= amount_usd
        self._move(dataset, -amount_usd)

    def _move(self, dataset: str | None, amount_usd: Decimal) -> None:
        if dataset is not None:
            self.committed_by_dataset[dataset] = (
                self.committed_by_dataset.get(dataset, _ZERO) + amount_usd
            )


def allocate(total: Decimal, weights: Sequence[Decimal]) -> list[Decimal]:
    """Split ``total`` in proportion to ``weights`` so that the shares sum exactly to ``total``:
    each share rounded down to the total's own decimal places (at least 12), the remainder on
    the largest share. No weight (or all zero): equal shares."""
    if not weights:
        return []
    exponent = total.as_tuple().exponent
    places = max(12, -exponent if isinstance(exponent, int) else 0)
    quantum = Decimal(1).scaleb(-places)
    whole = sum(weights, Decimal(0))
    if whole <= 0:
        weights, whole = [Decimal(1)] * len(weights), Decimal(len(weights))
    shares = [(total * w / whole).quantize(quantum, rounding="ROUND_DOWN") for w in weights]
    largest = max(range(len(shares)), key=lambda i: weights[i])
    shares[largest] += total - sum(shares, Decimal(0))
    return [share.normalize() if share else Decimal(0) for share in shares]
