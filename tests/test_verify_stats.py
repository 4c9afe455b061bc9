"""Statistics of the precision check, against closed forms, hand computations and published tables.

Published values: Newcombe, R. G. (1998), "Two-sided confidence intervals for the single proportion:
comparison of seven methods", Statistics in Medicine 17, 857-872, Table II (methods 1: Wilson score,
and 5: Clopper-Pearson "exact"), for 81/263, 15/148, 0/20 and 1/29, to four decimals. The same
figures come out of statsmodels 0.15 ``proportion_confint(method="wilson"|"beta")`` and scipy 1.17
``binomtest(...).proportion_ci``; neither library is a dependency.
"""

from __future__ import annotations

from math import comb

import pytest

from openrouter_probe.verify.stats import (
    PairedCounts,
    binom_cdf,
    binom_sf,
    clopper_pearson,
    compare_to_reference,
    holm,
    mcnemar_exact,
    mcnemar_power,
    min_detectable_gap,
    wilson,
)

NEWCOMBE_TABLE_II = [
    # x, n, Wilson (low, high), Clopper-Pearson (low, high)
    (81, 263, (0.2553, 0.3662), (0.2527, 0.3676)),
    (15, 148, (0.0624, 0.1605), (0.0578, 0.1617)),
    (0, 20, (0.0, 0.1611), (0.0, 0.1684)),
    (1, 29, (0.0061, 0.1718), (0.0009, 0.1776)),
]


@pytest.mark.parametrize(("x", "n", "wilson_ci", "exact_ci"), NEWCOMBE_TABLE_II)
def test_intervals_match_newcombe_1998(
    x: int, n: int, wilson_ci: tuple[float, float], exact_ci: tuple[float, float]
) -> None:
    cp = clopper_pearson(x, n)
    assert (round(cp.low, 4), round(cp.high, 4)) == exact_ci
    w = wilson(x, n)
    assert (round(w.low, 4), round(w.high, 4)) == wilson_ci


def test_clopper_pearson_closed_forms_at_the_ends() -> None:
    # 0 of n: the upper bound solves (1 - p)^n = 0.025, so p = 1 - 0.025^(1/n); n of n mirrors it.
    assert clopper_pearson(0, 10).high == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-12)
    assert clopper_pearson(0, 10).high == pytest.approx(0.308497, abs=1e-6)
    assert clopper_pearson(10, 10).low == pytest.approx(0.691503, abs=1e-6)
    assert clopper_pearson(10, 10).high == 1.0
    # 200 of 200 at the default n: the lower bound is 0.025^(1/200) = 0.98172
    assert clopper_pearson(200, 200).low == pytest.approx(0.025 ** (1 / 200), abs=1e-12)


def test_clopper_pearson_at_half_is_symmetric_and_solves_its_tails() -> None:
    cp = clopper_pearson(5, 10)
    assert cp.low == pytest.approx(1 - cp.high, abs=1e-9)
    # the defining equations, computed here from the binomial sum by hand
    assert sum(comb(10, i) * cp.low**i * (1 - cp.low) ** (10 - i) for i in range(5, 11)) == (
        pytest.approx(0.025, abs=1e-9)
    )
    assert sum(comb(10, i) * cp.high**i * (1 - cp.high) ** (10 - i) for i in range(6)) == (
        pytest.approx(0.025, abs=1e-9)
    )
    assert (round(cp.low, 4), round(cp.high, 4)) == (0.1871, 0.8129)


def test_wilson_zero_successes_closed_form() -> None:
    z2 = 1.959963984540054**2
    assert wilson(0, 10).high == pytest.approx(z2 / (10 + z2), abs=1e-12)  # 0.27753


def test_interval_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="successes <= n"):
        clopper_pearson(11, 10)
    assert clopper_pearson(0, 0).high == 1.0  # no data: no information


def test_binomial_tails_by_hand() -> None:
    assert binom_cdf(1, 7, 0.5) == pytest.approx(8 / 128)
    assert binom_sf(8, 10, 0.5) == pytest.approx(56 / 1024)
    assert binom_cdf(-1, 5, 0.3) == 0.0
    assert binom_sf(0, 5, 0.3) == 1.0


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (1, 6, 16 / 128),  # 2 * (C(7,0) + C(7,1)) / 2^7
        (0, 5, 2 / 32),  # 2 * 1 / 2^5
        (10, 2, 158 / 4096),  # 2 * (1 + 12 + 66) / 2^12
        (14, 0, 2 / 2**14),
        (3, 3, 1.0),  # doubled tail above 1 is capped
        (0, 0, 1.0),  # no discordant pair: no evidence
    ],
)
def test_exact_mcnemar_by_hand(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)
    assert mcnemar_exact(c, b) == pytest.approx(p, rel=1e-12)


def test_holm_by_hand() -> None:
    # sorted: d 0.005*4 = 0.02, a 0.01*3 = 0.03, c 0.03*2 = 0.06, b 0.04*1 = 0.04 -> made monotone
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005})
    assert adjusted == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06, "d": 0.02})
    assert list(adjusted) == ["a", "b", "c", "d"]
    assert holm({"x": 0.7, "y": 0.9}) == {"x": 1.0, "y": 1.0}


def test_power_one_directional_by_hand() -> None:
    # p01 = 0: every discordant pair is b. At alpha 0.01 the test needs d >= 8 (2/2^8 <= 0.01 <
    # 2/2^7), so the power at p10 = 0.5 is P(Bin(10, 0.5) >= 8) = 56/1024.
    assert mcnemar_power(10, p10=0.5, p01=0.0, alpha=0.01) == pytest.approx(56 / 1024)
    # at alpha 0.05 it needs d >= 6: P(Bin(10, 0.5) >= 6) = 386/1024
    assert mcnemar_power(10, p10=0.5, p01=0.0, alpha=0.05) == pytest.approx(386 / 1024)


@pytest.mark.parametrize("n", [10, 37, 120])
def test_power_under_the_null_is_at_most_alpha(n: int) -> None:
    # the exact test keeps its level: with equal accuracies the rejection rate is <= alpha
    for psi in (0.05, 0.3):
        assert mcnemar_power(n, p10=psi / 2, p01=psi / 2, alpha=0.05) <= 0.05


def test_min_detectable_gap_at_n10_solves_its_closed_form() -> None:
    def power(gap: float) -> float:  # P(Bin(10, gap) >= 8), written out by hand
        return 45 * gap**8 * (1 - gap) ** 2 + 10 * gap**9 * (1 - gap) + gap**10

    mdg = min_detectable_gap(10, alpha=0.05 / 5)
    assert mdg is not None
    assert power(mdg) >= 0.8 > power(mdg - 2e-4)
    assert round(mdg, 3) == 0.842


def test_min_detectable_gap_shrinks_with_n_and_grows_with_background() -> None:
    gaps = [min_detectable_gap(n, alpha=0.01) for n in (50, 100, 200)]
    assert gaps[0] is not None and gaps[1] is not None and gaps[2] is not None
    assert gaps[0] > gaps[1] > gaps[2]
    assert round(gaps[2], 3) == 0.051  # the plan's "at best" figure for the default run
    noisy = min_detectable_gap(200, alpha=0.01, background=0.02)
    assert noisy is not None and noisy > gaps[2]
    assert min_detectable_gap(10, alpha=0.01, background=0.05) is None
    assert min_detectable_gap(0, alpha=0.05) is None


def test_verdict_differs_when_the_test_rejects() -> None:
    counts = PairedCounts(both=180, ref_only=14, endpoint_only=0, neither=6)
    out = compare_to_reference({"deepinfra/int4": counts})["deepinfra/int4"]
    assert out.verdict == "differs"
    assert out.p_value == pytest.approx(2 / 2**14)
    assert out.counts.gap == pytest.approx(0.07)
    assert "less accurate than the reference by 7.0 pp" in out.reason


def test_verdict_at_n10_is_inconclusive_even_with_perfect_agreement() -> None:
    out = compare_to_reference({"chutes/int4": PairedCounts(both=10)})["chutes/int4"]
    assert out.verdict == "inconclusive"
    assert out.min_detectable_gap is not None and out.min_detectable_gap > 0.6
    assert "more prompts needed" in out.reason


def test_verdict_consistent_needs_power_below_tolerance() -> None:
    agree = PairedCounts(both=190, ref_only=1, endpoint_only=1, neither=8)
    verdicts = compare_to_reference(dict.fromkeys(("a", "b", "c", "d", "e"), agree))
    assert {v.verdict for v in verdicts.values()} == {"consistent"}
    mdg = verdicts["a"].min_detectable_gap
    assert mdg is not None and 0.05 < mdg < 0.10
    # a stricter tolerance than the sample can support makes the same data inconclusive
    strict = compare_to_reference({"a": agree}, tolerance=0.03)["a"]
    assert strict.verdict == "inconclusive"


def test_holm_correction_turns_differs_into_within_tolerance() -> None:
    # b=7, c=0: raw p = 2/128 = 0.0156 <= 0.05 alone, but 5 x 0.0156 = 0.078 with five endpoints
    counts = PairedCounts(both=190, ref_only=7, neither=3)
    alone = compare_to_reference({"x": counts})["x"]
    assert alone.verdict == "differs"
    family = compare_to_reference({"x": counts, **dict.fromkeys("abcd", PairedCounts(both=200))})
    assert family["x"].p_adjusted == pytest.approx(5 * 2 / 128)
    # not significant after correction; the sample rules out a 10 pp gap, so within the tolerance
    # it is consistent, and the reason shows the small gap that was seen
    assert family["x"].verdict == "consistent"
    assert family["x"].reason.startswith("gap 3.5 pp not significant (Holm p=0.078)")


def test_verdict_without_paired_items() -> None:
    out = compare_to_reference({"x": PairedCounts()})["x"]
    assert out.verdict == "inconclusive"
    assert out.reason == "no prompt with a known answer scored on both"


def test_better_endpoint_differs_too() -> None:
    out = compare_to_reference({"x": PairedCounts(both=150, endpoint_only=20, neither=30)})["x"]
    assert out.verdict == "differs"
    assert out.reason.startswith("more accurate than the reference")
