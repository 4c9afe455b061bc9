"""The cap (``run.money.spend``): what a request may cost at worst, and the reservations under the cap.

Pure arithmetic on inline endpoints: every price a request may be billed for (the unaccounted-money cases:
26 KB of tools counted like a bare row, a row's own ``max_tokens`` routed to an endpoint the run's
excluded), the exact-cap boundary, the sub-caps of datasets and what a closed one lends.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.run.money.spend import (
    DEFAULT_WEB_RESULTS,
    Prices,
    RequestShape,
    SpendCap,
    request_shape,
)
from openrouter_probe.run.rows import PromptRow

D = Decimal


def _endpoint(tag: str, context: int | None = None, **pricing: Any) -> Endpoint:
    data: dict[str, Any] = {
        "tag": tag,
        "provider_name": tag.title(),
        "quantization": "int4",
        "pricing": pricing,
    }
    if context is not None:
        data["context_length"] = context
    return Endpoint.model_validate(data)


# -- a request's shape -----------------------------------------------------------------------


def test_a_shape_counts_every_byte_sent_images_searches_and_cache_writes() -> None:
    plain = request_shape(500, [{"role": "user", "content": "hi"}])
    assert plain == RequestShape(prompt_tokens=500 + 16 + 32)
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "x", "cache_control": {"t": 1}}]},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "data:..."}},
                {"type": "input_image", "image_url": "https://x/y.png"},
                {"type": "text", "text": "what is it?"},
            ],
        },
    ]
    params = {"plugins": [{"id": "web", "max_results": 3}, {"id": "file-parser"}]}
    shape = request_shape(26_000, messages, params)
    assert shape.prompt_tokens == 26_000 + 32 + 32
    assert (shape.images, shape.web_searches, shape.cache_write) == (2, 3, True)
    assert request_shape(10, [], {"plugins": [{"id": "web"}]}).web_searches == DEFAULT_WEB_RESULTS
    assert request_shape(10, [], {"plugins": [{"id": "web", "max_results": 0}]}).web_searches == 5
    assert (
        request_shape(10, [], {"plugins": [{"id": "web", "max_results": True}]}).web_searches == 5
    )
    assert request_shape(10, [], {"web_search_options": {}}).web_searches == 1
    one = {"plugins": [{"id": "web", "max_results": 1}], "web_search_options": {}}
    assert request_shape(10, [], one).web_searches == 2
    default_too = {"plugins": [{"id": "web", "max_results": 2}, {"id": "web"}]}
    assert request_shape(10, [], default_too).web_searches == 2 + DEFAULT_WEB_RESULTS
    assert request_shape(10, [], {"web_search_options": None}).web_searches == 0
    two = {"plugins": [{"id": "web", "max_results": 2}, {"id": "web", "max_results": 4}]}
    assert request_shape(10, [], two).web_searches == 6
    assert request_shape(10, [{"role": "user", "content": "no image"}]).images == 0
    # without parameters too: image parts and a message's own cache marker
    picture = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    assert request_shape(10, picture).images == 1
    marked = [{"role": "user", "content": "x", "cache_control": {"type": "ephemeral"}}]
    assert request_shape(10, marked).cache_write is True


# -- the worst case of one request -----------------------------------------------------------


PRICES = Prices(
    input_usd_per_token=D("0.000001"),
    output_usd_per_token=D("0.000004"),
    request_usd=D("0.002"),
    image_usd=D("0.01"),
    web_search_usd=D("0.004"),
    cache_write_usd_per_token=D("0.000003"),
    context_tokens=100_000,
)


def test_the_worst_case_of_a_bare_request() -> None:
    assert PRICES.worst_case_usd(prompt_tokens=1000, max_tokens=500) == D("0.001") + D("0.002") + D(
        "0.002"
    )
    shape = RequestShape(prompt_tokens=1000)
    assert PRICES.worst_case_usd(prompt_tokens=1000, max_tokens=500, shape=shape) == D("0.005")


def test_a_text_requests_worst_case_is_written_as_the_whole_sum_writes_it() -> None:
    """Its journal line holds the figure as text: the zero image and search terms (made once)
    keep their exponent in it, as when they are summed per request."""
    prices = Prices(D("6E-7"), D("3.0E-6"), request_usd=D("0.0010"), image_usd=D("1E-11"))
    text = prices.worst_case_usd(prompt_tokens=57, max_tokens=32, shape=RequestShape(57))
    summed = 57 * D("6E-7") + 32 * D("3.0E-6") + (D("0.0010") + (0 * D("1E-11") + 0 * D("0.004")))
    assert text.as_tuple() == summed.as_tuple() and str(text) == "0.00113020000"


def test_the_worst_case_adds_what_the_row_uses() -> None:
    images = RequestShape(prompt_tokens=1000, images=3)
    assert PRICES.worst_case_usd(prompt_tokens=1000, max_tokens=500, shape=images) == D("0.035")
    cache = RequestShape(prompt_tokens=1000, cache_write=True)
    assert PRICES.worst_case_usd(prompt_tokens=1000, max_tokens=500, shape=cache) == D("0.007")
    cheap_write = Prices(D("0.000001"), D("0.000004"), cache_write_usd_per_token=D("0.0000001"))
    assert cheap_write.worst_case_usd(prompt_tokens=10, max_tokens=0, shape=cache) == D("0.00001")
    # a web search's results fill the prompt up to the largest context, and each search is priced
    web = RequestShape(prompt_tokens=1000, web_searches=5)
    assert PRICES.worst_case_usd(prompt_tokens=1000, max_tokens=500, shape=web) == (
        D("0.1") + D("0.002") + D("0.002") + D("0.02")
    )
    huge = RequestShape(prompt_tokens=200_000, web_searches=1)
    assert PRICES.worst_case_usd(prompt_tokens=200_000, max_tokens=0, shape=huge) == D("0.206")
    # an endpoint that lists no search price: each result at OpenRouter's engine's ($4 per 1,000)
    no_context = Prices(D("0.000001"), D("0.000004"))
    assert no_context.worst_case_usd(prompt_tokens=10, max_tokens=0, shape=web) == D("0.02001")


def test_tool_heavy_rows_are_bounded_by_every_byte_they_send() -> None:
    """Issue 15: 26 KB of ``tools`` got the bound of a bare row (a $0.05 cap was overrun 6.6x)."""
    from openrouter_probe.run.send.request import RequestBuilder

    tools = [
        {
            "type": "function",
            "function": {"name": f"tool_{i}", "description": "d" * 400, "parameters": {}},
        }
        for i in range(60)
    ]
    row = PromptRow("r1", "d", [{"role": "user", "content": "hi"}], {"tools": tools}, 1, 30)
    builder = RequestBuilder(model="m", provider_json="{}")
    prefix = len(builder.prefix().encode())  # the run's part: model, provider block, stream
    heavy = builder.build(row, PRICES, max_tokens=100)
    own = len(heavy.body) - prefix  # every byte the row adds, its tools included
    assert len(json.dumps(tools)) > 26_000
    shape = heavy.shape
    assert shape.prompt_tokens == own + 16 + 32 > 26_000
    assert heavy.worst_usd == PRICES.worst_case_usd(
        prompt_tokens=shape.prompt_tokens, max_tokens=100, shape=shape
    )
    bare = builder.build(PromptRow("r2", "d", row.messages, {}, 1, 30), PRICES, max_tokens=100)
    bare_own = len(bare.body) - prefix
    assert heavy.worst_usd - bare.worst_usd == (own - bare_own) * PRICES.input_usd_per_token


def test_the_largest_max_tokens_that_fits() -> None:
    shape = RequestShape(prompt_tokens=1000)
    # fixed: 1000 x $1/M + $0.002 = $0.003; each output token $4/M
    assert PRICES.max_tokens_within(D("0.003"), prompt_tokens=1000, shape=shape) == 0
    assert PRICES.max_tokens_within(D("0.002999"), prompt_tokens=1000, shape=shape) == 0
    assert PRICES.max_tokens_within(D("0.003004"), prompt_tokens=1000, shape=shape) == 1
    assert PRICES.max_tokens_within(D("0.007"), prompt_tokens=1000, shape=shape) == 1000
    assert PRICES.max_tokens_within(D("0.0070039"), prompt_tokens=1000) == 1000
    free_output = Prices(D("0.000001"), D("0"))
    assert free_output.max_tokens_within(D("1"), prompt_tokens=10) == 2**31 - 1
    assert free_output.max_tokens_within(D("0.00001"), prompt_tokens=10) == 2**31 - 1  # exactly
    assert free_output.max_tokens_within(D("0"), prompt_tokens=10) == 0
    # what the row adds (two images at $0.01) comes off first
    images = RequestShape(prompt_tokens=1000, images=2)
    assert PRICES.max_tokens_within(D("0.027"), prompt_tokens=1000, shape=images) == 1000


# -- the prices of what a policy admits ------------------------------------------------------


def test_worst_case_prices_take_the_highest_of_each_price() -> None:
    endpoints = [
        _endpoint(
            "a",
            context=131_072,
            prompt="0.0000004",
            completion="0.000002",
            request="0.001",
            image="0.002",
        ),
        _endpoint(
            "b",
            context=262_144,
            prompt="0.0000006",
            completion="0.0000015",
            internal_reasoning="0.000003",
            web_search="0.005",
            input_cache_write="0.00000075",
        ),
        _endpoint("c", prompt="0.0000001", completion="0.0000025", image="0.003"),
    ]
    prices = Prices.worst_case(endpoints)
    assert prices == Prices(
        input_usd_per_token=D("0.0000006"),
        output_usd_per_token=D("0.000003"),  # b's reasoning price
        request_usd=D("0.001"),
        image_usd=D("0.003"),
        web_search_usd=D("0.005"),
        cache_write_usd_per_token=D("0.00000075"),
        context_tokens=262_144,
    )


def test_worst_case_prices_count_overrides_and_the_discount() -> None:
    endpoint = _endpoint(
        "grok",
        prompt="0.000002",
        completion="0.00001",
        discount=0.5,
        overrides=[
            {"min_prompt_tokens": 200_000, "prompt": "0.000004", "completion": "0.00002"},
            {"utc_start": 100, "utc_end": 300, "request": "0.01"},
            {"utc_start": 100, "utc_end": 300, "completion": "-1"},  # "variable": skipped
            {"utc_start": 100, "utc_end": 300, "completion": "n/a"},
        ],
    )
    prices = Prices.worst_case([endpoint])
    # the override's prices, discount applied (an override is a list price too)
    assert prices.input_usd_per_token == D("0.000002")
    assert prices.output_usd_per_token == D("0.00001")
    assert prices.request_usd == D("0.005")
    assert prices.image_usd == 0 and prices.context_tokens is None


def test_an_override_dearer_than_the_base_price_is_the_worst_case() -> None:
    endpoint = _endpoint(
        "deepseek",
        prompt="0.0000003",
        completion="0.000001",
        overrides=[{"utc_start": 1600, "utc_end": 2400, "completion": "0.000002", "prompt": "0"}],
    )
    prices = Prices.worst_case([endpoint])  # no discount: the override's own price
    assert prices.output_usd_per_token == D("0.000002")
    assert prices.input_usd_per_token == D("0.0000003")


def test_an_endpoint_without_an_output_price_cannot_be_bounded() -> None:
    with pytest.raises(ValueError, match="b lists no output price"):
        Prices.worst_case([_endpoint("a", completion="0.1"), _endpoint("b", prompt="0.1")])
    with pytest.raises(ValueError, match="no admitted endpoint"):
        Prices.worst_case([])
    only_reasoning = Prices.worst_case([_endpoint("r", internal_reasoning="0.000002")])
    assert only_reasoning.output_usd_per_token == D("0.000002")
    assert only_reasoning.input_usd_per_token == 0


# -- the cap -------------------------------------------------------------------------------------


def test_reservations_fit_up_to_the_cap_exactly() -> None:
    cap = SpendCap(D("0.010"), spent_usd=D("0.004"))
    assert cap.committed_usd == D("0.004") and cap.remaining_usd == D("0.006")
    assert cap.fits(D("0.006")) and not cap.fits(D("0.0060001"))
    assert cap.try_reserve(D("0.006"))  # exactly the cap: allowed
    assert not cap.try_reserve(D("0.00000001"))
    assert (cap.reserved_usd, cap.in_flight, cap.peak_committed_usd) == (D("0.006"), 1, D("0.010"))
    cap.settle(D("0.006"), D("0.001"))
    assert (cap.spent_usd, cap.reserved_usd, cap.in_flight) == (D("0.005"), 0, 0)
    assert cap.peak_committed_usd == D("0.010") and cap.overruns == 0
    cap.settle(D("0"), None)  # an unbilled answer settles nothing
    assert cap.spent_usd == D("0.005") and cap.in_flight == -1


def test_an_answer_dearer_than_its_reservation_is_an_overrun() -> None:
    cap = SpendCap(D("1"))
    cap.try_reserve(D("0.1"))
    cap.settle(D("0.1"), D("0.1"))
    assert cap.overruns == 0  # equal is not more
    cap.try_reserve(D("0.1"))
    cap.settle(D("0.1"), D("0.1000001"))
    assert cap.overruns == 1 and cap.spent_usd == D("0.2000001")


def test_added_and_given_back_money() -> None:
    cap = SpendCap(D("1"), spent_by_dataset={"a": D("0.2")}, spent_usd=D("0.2"))
    cap.add_spent(D("0.3"), "a")
    assert cap.spent_usd == D("0.5") and cap.committed_by_dataset == {"a": D("0.5")}
    cap.give_back(D("0.25"), "a")
    assert cap.spent_usd == D("0.25") and cap.committed_by_dataset == {"a": D("0.25")}
    cap.add_spent(D("0.1"))
    cap.give_back(D("0.05"))
    assert cap.spent_usd == D("0.3") and cap.committed_by_dataset == {"a": D("0.25")}
    cap.give_back(D("0.01"), "new")
    assert cap.committed_by_dataset["new"] == D("-0.01")


def test_no_cap_lets_everything_through() -> None:
    cap = SpendCap(None)
    assert cap.fits(D(10**9)) and cap.try_reserve(D(10**9), "a")
    assert cap.remaining_usd is None and cap.share_usd("a") is None
    cap.shares({"a": 1})
    assert cap.share_usd("a") is None


def test_remaining_is_never_negative() -> None:
    cap = SpendCap(D("1"), spent_usd=D("1.2"))
    assert cap.remaining_usd == 0


def test_datasets_share_the_cap_by_weight_and_a_closed_one_lends() -> None:
    cap = SpendCap(D("1.2"), spent_by_dataset={"gone": D("0.2")}, spent_usd=D("0.2"))
    cap.shares({"a": 1, "b": 1, "c": 2})
    # 1.2 - 0.2 that no open dataset owns = 1.0, split 1:1:2
    assert [cap.share_usd(d) for d in "abc"] == [D("0.25"), D("0.25"), D("0.5")]
    assert cap.share_usd("gone") is None
    assert cap.fits(D("0.25"), "a") and not cap.fits(D("0.2500001"), "a")
    assert cap.try_reserve(D("0.2"), "a")
    assert not cap.try_reserve(D("0.06"), "a") and cap.try_reserve(D("0.05"), "a")
    assert cap.committed_by_dataset["a"] == D("0.25")
    cap.settle(D("0.2"), D("0.05"), "a")
    assert cap.committed_by_dataset["a"] == D("0.10") and cap.spent_usd == D("0.25")
    # the global cap still binds: nothing beyond 1.2 whatever the shares
    assert cap.fits(D("0.5"), "c") and cap.fits(D("0.25"), "b")
    cap.close("a")  # a sends nothing more: what its share leaves goes to b and c
    assert cap.share_usd("a") is None
    pool = D("1.2") - D("0.2") - D("0.1")  # minus what no open dataset owns (gone, a)
    assert cap.share_usd("b") == pool / 3 and cap.share_usd("c") == pool * 2 / 3
    assert cap.fits(D("0.3"), "b") and not cap.fits(D("0.31"), "b")
    # a retry of a row of a closed dataset is only held to the global cap
    assert cap.fits(D("0.9"), "a") and not cap.fits(D("0.9500001"), "a")
    assert cap.fits(D("0.9"), None)
    with pytest.raises(ValueError, match="b: a weight must be above 0"):
        cap.shares({"b": 0})


def test_a_dataset_over_its_share_cannot_send_and_the_others_can() -> None:
    cap = SpendCap(D("1"), spent_by_dataset={"a": D("0.7")}, spent_usd=D("0.7"))
    cap.shares({"a": 1, "b": 1})
    assert cap.share_usd("a") == D("0.5") and not cap.fits(D("0.0000001"), "a")
    assert cap.fits(D("0.3"), "b") and not cap.fits(D("0.31"), "b")
    cap.close("a")
    assert cap.share_usd("b") == D("0.3")
