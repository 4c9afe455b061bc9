"""One number style: token counts, money, shares and JSON floats (``openrouter_probe.rules.quantities``)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from openrouter_probe.errors import ConfigError
from openrouter_probe.rules.quantities import (
    format_pct,
    format_tokens,
    format_usd,
    format_usd_per_m,
    parse_reasoning_share,
    parse_token_count,
    round_for_json,
)


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (999_999, "1M"),  # the unit is chosen after rounding: never "1000k"
        (999_994, "999.99k"),
        (999_999_999, "1B"),
        (999_994_999, "999.99M"),
        (1_000, "1k"),
        (999, "999"),
        (-999_999, "-1M"),
        (45_454_545, "45.45M"),
        (0, "0"),
    ],
)
def test_format_tokens_rounds_before_choosing_the_unit(count: int, shown: str) -> None:
    assert format_tokens(count) == shown


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("60,000,000", 60_000_000), ("1,500k", 1_500_000), ("2,000,000.5k", 2_000_000_500)],
)
def test_thousands_separators_are_accepted(text: str, tokens: int) -> None:
    assert parse_token_count(text) == tokens


@pytest.mark.parametrize("text", ["1,5M", "7,5M", "1,50M", "12,3456", "60,00,000"])
def test_a_decimal_comma_is_rejected_not_read_as_thousands(text: str) -> None:
    with pytest.raises(ConfigError, match="--output-tokens"):
        parse_token_count(text, what="--output-tokens")


def test_a_decimal_comma_says_how_to_write_it() -> None:
    with pytest.raises(ConfigError) as info:
        parse_token_count("1,5M", what="--output-tokens")
    assert str(info.value) == (
        "--output-tokens: '1,5M': a comma only separates thousands (60,000,000); "
        "for a decimal write 1.5M"
    )


def test_a_reversed_share_range_is_rejected_not_reordered() -> None:
    with pytest.raises(ConfigError) as info:
        parse_reasoning_share("0.9:0.1", what="--reasoning-share")
    assert str(info.value) == (
        "--reasoning-share: '0.9:0.1' is a reversed range; write the low share first: 0.1:0.9"
    )
    with pytest.raises(ConfigError, match="reversed"):
        parse_reasoning_share((0.8, 0.5))
    assert parse_reasoning_share("0.5:0.5") == (Decimal("0.5"), Decimal("0.5"))


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Decimal("2.2"), "$2.20/M"),
        (Decimal("1E+1"), "$10.00/M"),  # what Pricing's normalize() gives for $10/M
        (Decimal("0.075"), "$0.075/M"),
        (Decimal("0.0375"), "$0.0375/M"),
        (Decimal("2.6074663"), "$2.61/M"),
        (Decimal("0"), "$0.00/M"),
        (2.25, "$2.25/M"),
        (1234.5, "$1,234.50/M"),
        (None, "-"),
    ],
)
def test_format_usd_per_m(value: Decimal | float | None, shown: str) -> None:
    assert format_usd_per_m(value) == shown


def test_format_usd_and_pct() -> None:
    assert format_usd(Decimal("-3.5")) == "-$3.50"
    assert format_usd(132) == "$132.00"
    assert format_pct(Decimal("0.5")) == "50%"
    assert format_pct(0.1398, decimals=1) == "14.0%"


def test_round_for_json_rounds_by_the_unit_in_the_key() -> None:
    payload = {
        "uptime_30m_pct": 98.40000000000282,
        "weight": 0.07614044360758766,
        "price_out_usd_per_m": 2.6074663022,
        "time_to_finish_h": 11.999999999997,
        "latency_p50_ms": 1850.0000001,
        "other": 0.30000000000000004,
        "rows": [{"share": 0.13976247921}],
        "missing": float("nan"),
        "count": 3,
        "flag": True,
        "exact": Decimal("2.2"),
    }
    assert round_for_json(payload) == {
        "uptime_30m_pct": 98.4,
        "weight": 0.0761,
        "price_out_usd_per_m": 2.607466,
        "time_to_finish_h": 12.0,
        "latency_p50_ms": 1850.0,
        "other": 0.3,
        "rows": [{"share": 0.1398}],
        "missing": None,
        "count": 3,
        "flag": True,
        "exact": 2.2,
    }


@pytest.mark.parametrize("given", [0, "-0.01", Decimal("-5")])
def test_one_budget_check_says_the_same_for_a_run_and_a_plan(given: object) -> None:
    """A paid run's options, the budget planner and ``--budget-usd`` refuse a budget that is not
    positive through one check (``positive_usd``), in one message."""
    from click.testing import CliRunner

    from openrouter_probe.analysis.budget_job import make_job
    from openrouter_probe.cli import cli
    from openrouter_probe.run.config import RunPlan

    said = f"budget_usd={given!r}: a positive amount of USD, e.g. 100"
    if isinstance(given, int | Decimal):
        said = f"budget_usd={given}: a positive amount of USD, e.g. 100"
    with pytest.raises(ConfigError) as run:
        RunPlan.resolve(command="generate", out="o.jsonl", budget_usd=given, need_key=False)
    with pytest.raises(ConfigError) as plan:
        make_job(budget_usd=given, output_tokens="60M", output_tokens_per_dataset=None,
                 datasets=1, dataset_names=None, reasoning_share=None,
                 prompt_tokens_per_request=None, output_tokens_per_request=None,
                 prompt_to_output_ratio=None, concurrency=1)  # fmt: skip
    option = CliRunner().invoke(
        cli, ["budget", "m/x", "--offline", "--output-tokens", "1M", f"--budget-usd={given}"]
    )
    assert str(run.value) == str(plan.value) == said
    assert option.exit_code == 2
    assert f"--budget-usd {given}: a positive amount of USD, e.g. 100" in option.output
    assert run.value.args[0].code == plan.value.args[0].code == "budget-not-positive"
