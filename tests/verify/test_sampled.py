"""The sampled arm's MMD test (Hamming kernel, seeded permutation p-value)."""

from __future__ import annotations

import random

import pytest

from openrouter_probe.verify.sampled import SampledTest, mmd_test, units


def _draw(rng: random.Random, temperature: float, n: int) -> list[str]:
    # Two-letter alphabet per position: 'a' (greedy) vs 'b'; hotter -> more 'b'.
    share = 0.1 * temperature
    return ["".join("b" if rng.random() < share else "a" for _ in range(20)) for _ in range(n)]


def _mmd(reference: list[str], endpoint: list[str], length: int = 4) -> float:
    return mmd_test({"": reference}, {"": endpoint}, length=length, permutations=1).statistic


def test_kernel_counts_agreeing_positions_over_length() -> None:
    # k(abcd, abxd) = 3/4: MMD squared = k_ref + k_end - 2 k_cross = 1 + 1 - 2 * 0.75
    assert _mmd(["abcd", "abcd"], ["abxd", "abxd"]) == pytest.approx(0.5)
    # missing units never agree: k(ab, ab) = 2/4, k(ab, abcd) = 2/4, so 0.5 + 1 - 2 * 0.5
    assert _mmd(["ab", "ab"], ["abcd", "abcd"]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="length must be >= 1"):
        _mmd(["a", "a"], ["a", "a"], length=0)


def test_identical_samples_have_negative_or_zero_unbiased_mmd() -> None:
    same = ["aaaa", "aaab", "abaa"]
    assert _mmd(same, list(same)) <= 0.0


def test_completions_of_different_prompts_never_match() -> None:
    # Each prompt alone: the endpoint says what the reference says. Pooled across prompts the
    # two would look alike too; the per-prompt statistic is about 0 and the test cannot reject.
    ref = {"p1": ["aaaa", "aaab"] * 5, "p2": ["bbbb", "bbba"] * 5}
    same = {"p1": ["aaab", "aaaa"] * 5, "p2": ["bbba", "bbbb"] * 5}
    swapped = {"p1": ["bbbb", "bbba"] * 5, "p2": ["aaaa", "aaab"] * 5}
    kept = mmd_test(ref, same, length=4, permutations=200, seed=0)
    assert kept.p_value > 0.05 and kept.prompts == 2 and kept.samples == (20, 20)
    # The same pooled words under the wrong prompts: only a per-prompt kernel sees it.
    moved = mmd_test(ref, swapped, length=4, permutations=200, seed=0)
    assert moved.p_value <= 0.05 and moved.statistic > 0.5


def test_a_prompt_with_one_sample_on_a_side_is_left_out() -> None:
    ref = {"p1": ["ab", "ab", "ab"], "p2": ["ab"]}
    end = {"p1": ["ab", "ab"], "p2": ["zz", "zz"]}
    found = mmd_test(ref, end, length=2, permutations=50, seed=0)
    assert found.prompts == 1 and found.statistic == pytest.approx(0.0)


def test_units_are_whitespace_words() -> None:
    assert units(" the  model weighs\neach") == ("the", "model", "weighs", "each")
    assert units(None) == () and units("") == ()


def test_hotter_endpoint_differs_and_same_one_does_not() -> None:
    rng = random.Random(7)
    ref = {"": _draw(rng, 1.0, 30)}

    def test(endpoint: list[str]) -> SampledTest:
        return mmd_test(ref, {"": endpoint}, length=20, permutations=200, seed=1)

    hot = test(_draw(rng, 3.0, 30))
    assert hot.p_value == pytest.approx(1 / 201)
    same = test(_draw(rng, 1.0, 30))
    assert same.p_value > 0.05
    again = test(_draw(random.Random(7), 1.0, 30))
    assert again == test(_draw(random.Random(7), 1.0, 30))


def test_too_few_samples_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="raise the sampled arm's N"):
        mmd_test({"": ["a"]}, {"": ["a", "b"]}, length=1, permutations=10, seed=0)
