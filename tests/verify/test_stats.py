"""Statistics of the precision check, against closed forms, hand computations and published tables.

Published values: Newcombe, R. G. (1998), "Two-sided confidence intervals for the single proportion:
comparison of seven methods", Statistics in Medicine 17, 857-872, Table II (method 5:
Clopper-Pearson "exact"), for 81/263, 15/148, 0/20 and 1/29, to four decimals. The same
figures come out of statsmodels 0.15 ``proportion_confint(method="beta")`` and scipy 1.17
``binomtest(...).proportion_ci``. Both are test-only dependencies: the mid-p and exact McNemar tests,
Holm's correction and Tango's interval are cross-checked against them (Tango's through an
independent computation: the restricted likelihood maximised by ``scipy.optimize``, the bounds found
by ``brentq``), on many random tables, to 1e-9.
"""

from __future__ import annotations

import gc
import random
from math import comb

import pytest

from openrouter_probe.errors import ConfigError
from openrouter_probe.verify.stats import (
    binom_cdf,
    binom_sf,
    check_statistics,
    clopper_pearson,
    equivalence_power,
    floor_test,
    holm,
    mcnemar_exact,
    mcnemar_midp,
    mcnemar_power,
    min_detectable_gap,
    prompts_for_equivalence,
    tango_interval,
)
from openrouter_probe.verify.verdict import PairedCounts, PairedMeasure, compare_to_reference

NEWCOMBE_TABLE_II = [
    # x, n, Clopper-Pearson (low, high)
    (81, 263, (0.2527, 0.3676)),
    (15, 148, (0.0578, 0.1617)),
    (0, 20, (0.0, 0.1684)),
    (1, 29, (0.0009, 0.1776)),
]


@pytest.mark.parametrize(("x", "n", "exact_ci"), NEWCOMBE_TABLE_II)
def test_intervals_match_newcombe_1998(x: int, n: int, exact_ci: tuple[float, float]) -> None:
    cp = clopper_pearson(x, n)
    assert (round(cp.low, 4), round(cp.high, 4)) == exact_ci


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
    # p01 = 0: every discordant pair is b. The exact test at alpha 0.01 needs d >= 8 (2/2^8 <= 0.01
    # < 2/2^7), so the power at p10 = 0.5 is P(Bin(10, 0.5) >= 8) = 56/1024.
    assert mcnemar_power(10, p10=0.5, p01=0.0, alpha=0.01, mid_p=False) == pytest.approx(56 / 1024)
    # at alpha 0.05 it needs d >= 6: P(Bin(10, 0.5) >= 6) = 386/1024
    assert mcnemar_power(10, p10=0.5, p01=0.0, alpha=0.05, mid_p=False) == pytest.approx(386 / 1024)
    # mid-p with b = d, c = 0 is 2^-d (half the exact 2^(1-d)): d >= 7 at 0.01, d >= 5 at 0.05
    assert mcnemar_power(10, p10=0.5, p01=0.0, alpha=0.01) == pytest.approx(176 / 1024)
    assert mcnemar_power(10, p10=0.5, p01=0.0, alpha=0.05) == pytest.approx(638 / 1024)


@pytest.mark.parametrize("n", [10, 37, 120])
def test_exact_power_under_the_null_is_at_most_alpha(n: int) -> None:
    # the exact test keeps its level: with equal accuracies the rejection rate is <= alpha
    for psi in (0.05, 0.3):
        assert mcnemar_power(n, p10=psi / 2, p01=psi / 2, alpha=0.05, mid_p=False) <= 0.05


def test_mid_p_is_closer_to_the_nominal_level_than_exact() -> None:
    # The exact test's size at n=200, 5% discordance, alpha 0.01 (five endpoints) is far below 0.01;
    # mid-p's is closer to it and still at or below it here.
    exact = mcnemar_power(200, p10=0.025, p01=0.025, alpha=0.01, mid_p=False)
    mid = mcnemar_power(200, p10=0.025, p01=0.025, alpha=0.01)
    assert exact < mid <= 0.01
    assert round(exact, 4) == 0.0031


def test_power_by_brute_force_enumeration() -> None:
    # every (b, c, rest) outcome of n = 12 pairs, multinomially weighted, through mcnemar_midp itself
    n, p10, p01, alpha = 12, 0.3, 0.05, 0.05
    total = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            weight = comb(n, b) * comb(n - b, c) * p10**b * p01**c * (1 - p10 - p01) ** (n - b - c)
            total += weight * (mcnemar_midp(b, c) <= alpha)
    assert mcnemar_power(n, p10=p10, p01=p01, alpha=alpha) == pytest.approx(total, abs=1e-12)


def test_min_detectable_gap_at_n10_solves_its_closed_form() -> None:
    def power(gap: float) -> float:  # P(Bin(10, gap) >= 8), written out by hand
        return 45 * gap**8 * (1 - gap) ** 2 + 10 * gap**9 * (1 - gap) + gap**10

    mdg = min_detectable_gap(10, alpha=0.05 / 5, mid_p=False)
    assert mdg is not None
    assert power(mdg) >= 0.8 > power(mdg - 2e-4)
    assert round(mdg, 3) == 0.842


def test_min_detectable_gap_shrinks_with_n_and_grows_with_background() -> None:
    gaps = [min_detectable_gap(n, alpha=0.01) for n in (50, 100, 200)]
    assert gaps[0] is not None and gaps[1] is not None and gaps[2] is not None
    assert gaps[0] > gaps[1] > gaps[2]
    assert round(gaps[2], 3) == 0.045  # mid-p: below the exact test's 0.051
    assert round(min_detectable_gap(200, alpha=0.01, mid_p=False) or 0, 3) == 0.051
    noisy = min_detectable_gap(200, alpha=0.01, background=0.02)
    assert noisy is not None and noisy > gaps[2]
    assert min_detectable_gap(10, alpha=0.01, background=0.05) is None
    assert min_detectable_gap(0, alpha=0.05) is None


@pytest.mark.slow
def test_min_detectable_gap_is_fast_and_continuous_above_the_exact_limit() -> None:
    # n = 5000 is exact, n = 5001 takes the approximation: the two agree to 3e-4
    for background in (0.0, 0.02):
        exact = min_detectable_gap(5000, alpha=0.005, background=background)
        approx = min_detectable_gap(5001, alpha=0.005, background=background)
        assert exact is not None and approx is not None
        assert approx == pytest.approx(exact, abs=3e-4)
    # n = 100,000 (94 s before the approximation) in milliseconds; 0.24 pp at 2% background
    far = min_detectable_gap(100_000, alpha=0.005, background=0.02)
    assert far is not None and round(far, 4) == 0.0024


@pytest.mark.parametrize("power", [0.0, 1.0, -0.1, 1.5])
def test_power_outside_zero_one_is_refused(power: float) -> None:
    # min_detectable_gap(50, power=1.0) returned 0.623 before: a power of 1 is never reached
    with pytest.raises(ValueError, match="power must be in"):
        min_detectable_gap(50, alpha=0.05, power=power)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"alpha": 0}, "alpha=0: must be a number strictly between 0 and 1"),
        ({"alpha": 1.0}, "alpha=1.0: must be"),
        ({"power": 1}, "power=1: must be"),
        ({"tolerance": 1}, "tolerance=1: must be"),
        ({"tolerance": -0.1}, "tolerance=-0.1: must be"),
        ({"repeats": 1}, "repeats=1: must be an integer from 2 to 10"),
        ({"repeats": 2.5}, "repeats=2.5: must be an integer"),
        ({"n": 0}, "n=0: must be an integer >= 1"),
        ({"alpha": True}, "alpha=True: must be"),
    ],
)
def test_statistical_arguments_are_checked(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        check_statistics(**options)  # type: ignore[arg-type]


def test_midp_against_scipy_and_exact_against_statsmodels() -> None:
    stats = pytest.importorskip("scipy.stats")
    tables = pytest.importorskip("statsmodels.stats.contingency_tables")
    rng = random.Random(17)
    for _ in range(300):
        b, c = rng.randint(0, 80), rng.randint(0, 80)
        d, k = b + c, min(b, c)
        if d == 0:
            continue
        expected = min(1.0, 2 * (stats.binom.cdf(k - 1, d, 0.5) + 0.5 * stats.binom.pmf(k, d, 0.5)))
        assert mcnemar_midp(b, c) == pytest.approx(expected, abs=1e-10)
        exact = tables.mcnemar([[0, b], [c, 0]], exact=True).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(exact, abs=1e-10)


def test_holm_against_statsmodels(monkeypatch: pytest.MonkeyPatch) -> None:
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    # statsmodels' holm branch runs gc.collect() on every call: 0.3 s each with the suite's heap
    # (57 s for the 50 calls under load), and nothing it computes depends on it
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    rng = random.Random(3)
    for _ in range(50):
        ps = {f"e{i}": rng.random() ** 3 for i in range(rng.randint(1, 12))}
        _, expected, _, _ = multitest.multipletests(list(ps.values()), method="holm")
        assert list(holm(ps).values()) == pytest.approx(list(expected), abs=1e-12)


def _tango_by_scipy(b: int, c: int, n: int, level: float) -> tuple[float, float]:
    """Tango's interval computed another way: the restricted MLE of p21 by numerical maximisation
    of the multinomial likelihood, the score statistic from it, the bounds by brentq."""
    optimize = pytest.importorskip("scipy.optimize")
    stats = pytest.importorskip("scipy.stats")
    z = stats.norm.ppf(1 - (1 - level) / 2)
    rest = n - b - c

    def q_hat(d: float) -> float:
        lo, hi = max(0.0, -d) + 1e-13, (1 - d) / 2 - 1e-13

        def neg(q: float) -> float:  # p12 = q + d, p21 = q, p11 + p22 = 1 - 2q - d
            total = 0.0
            for count, p in ((b, q + d), (c, q), (rest, 1 - 2 * q - d)):
                total += count * __import__("math").log(max(p, 1e-300)) if count else 0.0
            return -total

        return float(optimize.minimize_scalar(neg, bounds=(lo, hi), method="bounded",
                                              options={"xatol": 1e-13}).x)  # fmt: skip

    def t(d: float) -> float:
        return (b - c - n * d) / (n * (2 * q_hat(d) + d * (1 - d))) ** 0.5

    est = (b - c) / n
    low = optimize.brentq(lambda d: t(d) - z, -1 + 1e-9, est) if est > -1 else -1.0
    high = optimize.brentq(lambda d: t(d) + z, est, 1 - 1e-9) if est < 1 else 1.0
    return low, high


def test_tango_interval_against_an_independent_scipy_computation() -> None:
    rng = random.Random(5)
    cases = [(1, 7, 21), (6, 16, 161), (5, 0, 80), (0, 0, 60), (14, 0, 200), (30, 29, 400)]
    cases += [(rng.randint(0, 20), rng.randint(0, 20), rng.randint(45, 300)) for _ in range(20)]
    for b, c, n in cases:
        for level in (0.9, 0.95, 0.98):
            ours = tango_interval(b, c, n, level=level)
            low, high = _tango_by_scipy(b, c, n, level)
            assert (ours.low, ours.high) == pytest.approx((low, high), abs=2e-6), (b, c, n, level)


def test_tango_at_zero_is_mcnemars_statistic() -> None:
    # T(0) = (b - c) / sqrt(b + c): the interval excludes 0 exactly when the asymptotic McNemar
    # test (statsmodels, no continuity correction) rejects at 1 - level
    tables = pytest.importorskip("statsmodels.stats.contingency_tables")
    for b, c, n in [(12, 3, 100), (9, 3, 100), (20, 8, 300), (5, 0, 80), (4, 0, 80)]:
        p = tables.mcnemar([[0, b], [c, 0]], exact=False, correction=False).pvalue
        interval = tango_interval(b, c, n, level=0.95)
        assert (interval.low > 0) == (p < 0.05), (b, c, n, p)


def test_the_issues_cases_get_the_verdict_their_intervals_allow() -> None:
    # a 6.25 pp gap whose upper bound is past 10 pp: never consistent (mid-p rejects: differs)
    gap = compare_to_reference({"x": PairedCounts(70, 5, 0, 5)})["x"]
    assert gap.verdict == "differs"
    assert gap.interval is not None and gap.interval.high > 0.1
    # no discordant pair in 60: the 90% interval is within +-4.3 pp, so consistent
    tight = compare_to_reference({"x": PairedCounts(55, 0, 0, 5)})["x"]
    assert tight.verdict == "consistent"
    assert tight.interval is not None and round(tight.interval.high, 4) == 0.0431
    assert "accuracy [-4.3, +4.3] pp" in tight.reason


def _consistent_alone(b: int, c: int, n: int) -> bool:
    """compare_to_reference's rule for one endpoint, restated: mid-p does not reject at 0.05 and
    the 90% Tango interval lies inside +-10 pp."""
    interval = tango_interval(b, c, n, level=0.9)
    return mcnemar_midp(b, c) > 0.05 and interval.low > -0.1 and interval.high < 0.1


def test_consistent_is_rare_when_the_true_gap_equals_the_tolerance() -> None:
    # Exact enumeration of every (b, c) for n = 80 pairs with a true gap of 10 pp: the chance of
    # `consistent` is the equivalence test's size, at most alpha (it was up to 18% before).
    n, tolerance = 80, 0.1
    for b, c in [(0, 0), (3, 1), (6, 0), (2, 2)]:  # the restatement is compare_to_reference's
        verdict = compare_to_reference({"x": PairedCounts(n - b - c, b, c, 0)})["x"].verdict
        assert (verdict == "consistent") == _consistent_alone(b, c, n)
    for p01 in (0.0, 0.02, 0.05, 0.1):
        p10 = p01 + tolerance
        size = 0.0
        for b in range(n + 1):
            for c in range(n + 1 - b):
                weight = comb(n, b) * comb(n - b, c) * p10**b * p01**c
                weight *= (1 - p10 - p01) ** (n - b - c)
                if weight > 1e-12 and _consistent_alone(b, c, n):
                    size += weight
        assert size <= 0.05, (p01, size)


def test_equivalence_power_and_the_prompts_it_needs() -> None:
    # gap 0, discordance 5%, tolerance 10 pp, one-sided alpha 0.01 (five endpoints). By hand: at
    # d = 0.1 with p10 = p01 = 0.025, Tango's restricted q solves 2q^2 + Bq + C = 0 with
    # B = -0.05 + 2 * 0.1 = 0.15, C = -0.025 * 0.09: q = 0.01281, so V = 2q + 0.09 = 0.11562; the
    # interval is inside when the estimate (sd sqrt(0.05 / n)) is within 0.1 - z sqrt(V / n):
    # power = 2 * Phi((0.1 - z_0.99 sqrt(V / n)) / sqrt(0.05 / n)) - 1.
    stats = pytest.importorskip("scipy.stats")
    q = ((0.15**2 + 8 * 0.025 * 0.09) ** 0.5 - 0.15) / 4
    assert round(q, 5) == 0.01281
    z = stats.norm.ppf(0.99)
    by_hand = (
        2 * stats.norm.cdf((0.1 - z * ((2 * q + 0.09) / 200) ** 0.5) / (0.05 / 200) ** 0.5) - 1
    )
    assert equivalence_power(200, discordance=0.05, tolerance=0.1, alpha=0.01) == (
        pytest.approx(by_hand, abs=1e-12)
    )
    n = prompts_for_equivalence(tolerance=0.1, alpha=0.01, discordance=0.05)
    assert n == 117
    assert equivalence_power(n, discordance=0.05, tolerance=0.1, alpha=0.01) >= 0.8
    assert equivalence_power(n - 1, discordance=0.05, tolerance=0.1, alpha=0.01) < 0.8
    # a true gap at the tolerance is never "powered"
    assert equivalence_power(10_000, discordance=0.05, tolerance=0.1, alpha=0.01, gap=0.1) == 0


def test_equivalence_power_matches_a_simulation() -> None:
    # the approximation against the Tango interval itself on 3000 simulated samples (seeded)
    rng = random.Random(11)
    n, p10, p01, level = 150, 0.03, 0.02, 0.98
    hits = 0
    runs = 3000
    for _ in range(runs):
        b = c = 0
        for _ in range(n):
            u = rng.random()
            b += u < p10
            c += p10 <= u < p10 + p01
        interval = tango_interval(b, c, n, level=level)
        hits += interval.low > -0.1 and interval.high < 0.1
    predicted = equivalence_power(n, discordance=0.05, tolerance=0.1, alpha=0.01, gap=0.01)
    assert hits / runs == pytest.approx(predicted, abs=0.04)


def test_floor_test_with_two_runs_is_one_sided_mid_p_mcnemar() -> None:
    stats = pytest.importorskip("scipy.stats")
    for b, c in [(12, 3), (3, 12), (5, 5), (0, 4), (20, 0)]:
        p = floor_test({1: (b + c, b)}, repeats=2)
        expected = stats.binom.sf(b, b + c, 0.5) + 0.5 * stats.binom.pmf(b, b + c, 0.5)
        assert p == pytest.approx(expected, abs=1e-12)
    assert floor_test({}, repeats=2) == 1.0


def test_floor_test_with_three_runs_by_enumeration() -> None:
    # items with t=1 differ on the endpoint w.p. 1/3, with t=2 w.p. 2/3; brute-force the sum
    groups = {1: (4, 3), 2: (3, 3)}
    s = 6
    pmf = [0.0] * 8
    for mask in range(1 << 7):
        bits = [(mask >> i) & 1 for i in range(7)]
        prob = 1.0
        for i, bit in enumerate(bits):
            q = 1 / 3 if i < 4 else 2 / 3
            prob *= q if bit else 1 - q
        pmf[sum(bits)] += prob
    expected = sum(pmf[s + 1 :]) + pmf[s] / 2
    assert floor_test(groups, repeats=3) == pytest.approx(expected, abs=1e-12)


def test_verdict_differs_when_the_test_rejects() -> None:
    counts = PairedCounts(both=180, ref_only=14, endpoint_only=0, neither=6)
    out = compare_to_reference({"deepinfra/int4": counts})["deepinfra/int4"]
    assert out.verdict == "differs"
    assert out.p_value == pytest.approx(1 / 2**14)
    assert out.counts.gap == pytest.approx(0.07)
    assert out.reason == (
        "less accurate than the reference by 7.0 pp (Holm p=6.1e-05, 90% interval [+4.6, +10.6] pp)"
    )
    # a smaller gap whose interval is inside the 10 pp tolerance: equality rejected and
    # equivalence shown at once, its own verdict (issue 26; it read "differs")
    small = compare_to_reference({"x": PairedCounts(460, 20, 2, 18)})["x"]
    assert small.verdict == "differs, within tolerance"
    assert small.reason == (
        "less accurate than the reference by 3.6 pp (Holm p=6.6e-05, 90% interval [+2.2, +5.4] pp, "
        "inside the tolerance); every 90% interval lies inside +-10.0 pp: a real difference, "
        "smaller than the tolerance"
    )


def test_differs_within_tolerance_needs_every_measure_inside() -> None:
    # accuracy rejects inside the tolerance, but 20 tool calls leave a wide interval: differs
    accuracy = PairedCounts(460, 20, 2, 18).measure()
    wide = PairedMeasure("tool_schema", "gap", 20, b=2, c=1)
    out = compare_to_reference({"x": [accuracy, wide]})["x"]
    assert [t.within for t in out.tests] == [True, False]
    assert out.verdict == "differs"


def test_verdict_at_n10_is_inconclusive_even_with_perfect_agreement() -> None:
    out = compare_to_reference({"chutes/int4": PairedCounts(both=10)})["chutes/int4"]
    assert out.verdict == "inconclusive"
    assert out.min_detectable_gap is not None and out.min_detectable_gap > 0.5
    assert out.prompts_needed is not None and out.prompts_needed > 10
    assert f"about {out.prompts_needed} paired prompts would settle it" in out.reason


def test_verdict_consistent_needs_the_interval_inside_the_tolerance() -> None:
    agree = PairedCounts(both=190, ref_only=1, endpoint_only=1, neither=8)
    verdicts = compare_to_reference(dict.fromkeys(("a", "b", "c", "d", "e"), agree))
    assert {v.verdict for v in verdicts.values()} == {"consistent"}
    interval = verdicts["a"].interval
    assert interval is not None and interval.level == pytest.approx(0.98)
    assert -0.1 < interval.low < -0.02 and 0.02 < interval.high < 0.1
    # a stricter tolerance than the interval allows makes the same data inconclusive
    strict = compare_to_reference({"a": agree}, tolerance=0.01)["a"]
    assert strict.verdict == "inconclusive"


def test_holm_correction_turns_differs_into_consistent() -> None:
    # b=5, c=0: raw mid-p 1/32 = 0.031 alone rejects; five endpoints make it 5/32 = 0.156
    counts = PairedCounts(both=192, ref_only=5, neither=3)
    alone = compare_to_reference({"x": counts})["x"]
    assert alone.verdict == "differs, within tolerance"  # 2.5 pp, [+1.1, +5.0] inside 10 pp
    family = compare_to_reference({"x": counts, **dict.fromkeys("abcd", PairedCounts(both=200))})
    assert family["x"].p_adjusted == pytest.approx(5 / 32)
    assert family["x"].verdict == "consistent"
    assert family["x"].reason.startswith("no test rejects (smallest Holm p=0.16)")


def test_verdict_without_paired_items() -> None:
    out = compare_to_reference({"x": PairedCounts()})["x"]
    assert out.verdict == "inconclusive"
    assert out.reason == "no prompt scored on both sides"


def test_better_endpoint_differs_too() -> None:
    out = compare_to_reference({"x": PairedCounts(both=150, endpoint_only=20, neither=30)})["x"]
    assert out.verdict == "differs"
    assert out.reason.startswith("more accurate than the reference")


def test_an_equal_accuracy_flip_differs_on_agreement_only() -> None:
    # 15% flipping each way: accuracy is consistent, disagreement 30% against a floor of 2%
    accuracy = PairedCounts(1400, 150, 150, 300).measure()
    agreement = PairedMeasure("agreement", "excess", 2000, b=560, c=0, groups=((1, 600, 580),))
    out = compare_to_reference({"x": [accuracy, agreement]})["x"]
    assert out.verdict == "differs"
    assert out.reason.startswith("answers disagree with the reference more than it with itself")
    acc_test = out.test("accuracy")
    assert acc_test is not None and acc_test.within and acc_test.p_adjusted == pytest.approx(1.0)


def test_holm_runs_over_every_endpoint_and_measure() -> None:
    a = PairedCounts(both=190, ref_only=5, neither=5).measure()  # mid-p 1/32
    t = PairedMeasure("tool_schema", "gap", 100, b=5, c=0)  # mid-p 1/32
    out = compare_to_reference({"x": [a, t]})["x"]
    # two tests in the family: 2 x 1/32 = 0.0625 > 0.05 for the smaller, so neither rejects
    assert [round(m.p_adjusted, 4) for m in out.tests] == [0.0625, 0.0625]
    assert out.verdict != "differs"
