"""The sampled arm's test: does an endpoint sample from the reference's distribution?

The permutation MMD test under the Hamming kernel of Gao, Liang & Guestrin, "Model Equality
Testing: Which Model Is This API Serving?" (ICLR 2025), on whitespace-separated words, relabelled
within each prompt; it can reject, never show equality. ``simulated_power`` is its planned power
on the fake's sampling model (``rules.sampling_model``). ``docs/verify.md``, "The sampled arm".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

Completion = Sequence[object]
#: Completions by prompt id.
Samples = Mapping[str, Sequence[Completion]]

__all__ = [
    "DEFAULT_LENGTH",
    "DEFAULT_PERMUTATIONS",
    "SampledTest",
    "mmd_test",
    "simulated_power",
    "units",
]

#: Units of each completion compared (the fake's sampling model draws 32 words).
DEFAULT_LENGTH = 32
#: Relabellings behind each p-value (the smallest p is 1/1001).
DEFAULT_PERMUTATIONS = 1000


@dataclass(frozen=True)
class SampledTest:
    """One endpoint's sampled-arm result: the statistic and its permutation p-value (no
    interval: the test can reject, never show equality); ``samples`` is the endpoint's and the
    reference's sample count over ``prompts`` prompts."""

    statistic: float
    p_value: float
    permutations: int
    samples: tuple[int, int] = (0, 0)
    prompts: int = 0
    #: The power the test had with the samples it compared (``sampled_arm.realised_power``).
    power: float | None = None


def units(text: str | None) -> tuple[str, ...]:
    """A completion's units: its whitespace-separated words (``()`` for no text)."""
    return tuple(text.split()) if text else ()


def _encode(pool: Sequence[Completion], length: int) -> np.ndarray:
    """The pool as an int matrix (one row a completion; -1 where it has no unit)."""
    if pool and all(isinstance(c, np.ndarray) and len(c) >= length for c in pool):
        return np.stack([np.asarray(c)[:length] for c in pool])  # already codes (simulations)
    codes: dict[object, int] = {}
    out = np.full((len(pool), length), -1, dtype=np.int64)
    for row, completion in enumerate(pool):
        for col, unit in enumerate(list(completion)[:length]):
            out[row, col] = codes.setdefault(unit, len(codes))
    return out


def _gram(codes: np.ndarray, length: int) -> np.ndarray:
    """The Hamming kernel between every two rows, with a zero diagonal."""
    same = (codes[:, None, :] == codes[None, :, :]) & (codes[:, None, :] >= 0)
    gram: np.ndarray = same.sum(axis=2) / length
    np.fill_diagonal(gram, 0.0)
    return gram


@dataclass(frozen=True)
class _Block:
    """One prompt's kernel over its reference (first ``n``) and endpoint samples."""

    gram: np.ndarray
    n: int
    column_sums: np.ndarray
    total: float


def _blocks(ref: Samples, end: Samples, length: int) -> list[_Block]:
    """One block per prompt with at least 2 samples on each side."""
    if length < 1:
        raise ValueError(f"length must be >= 1 (got {length}); use e.g. 32")
    out = []
    for g in ref:
        if len(ref[g]) < 2 or len(end.get(g, ())) < 2:
            continue
        gram = _gram(_encode([*ref[g], *end[g]], length), length)
        sums = gram.sum(axis=0)
        out.append(_Block(gram, len(ref[g]), sums, float(sums.sum())))
    if not out:
        raise ValueError(
            "the MMD test needs >= 2 samples per side of one prompt at least (got "
            f"{sum(map(len, ref.values()))} reference, {sum(map(len, end.values()))} endpoint "
            "over their prompts); raise the sampled arm's N"
        )
    return out


def _statistics(
    labels: np.ndarray, grams: np.ndarray, sums: np.ndarray, totals: np.ndarray, n: int
) -> np.ndarray:
    """Each prompt's unbiased MMD squared (rows) for each labelling (columns) of blocks of one
    shape: ``labels`` (prompts, labellings, samples) with ``n`` ones (reference) per row."""
    m = labels.shape[2] - n
    within_ref = (np.matmul(labels, grams) * labels).sum(axis=2)
    reach = np.einsum("prs,ps->pr", labels, sums)  # reference rows' kernel values, summed
    cross = reach - within_ref
    within_end = totals[:, None] - 2 * reach + within_ref
    found: np.ndarray = (
        within_ref / (n * (n - 1)) + within_end / (m * (m - 1)) - 2 * cross / (n * m)
    )
    return found


def _by_shape(blocks: Sequence[_Block]) -> list[tuple[int, int, list[_Block]]]:
    """Blocks of one shape together (one batched product each)."""
    shapes: dict[tuple[int, int], list[_Block]] = {}
    for b in blocks:
        shapes.setdefault((len(b.gram), b.n), []).append(b)
    return [(size, n, same) for (size, n), same in shapes.items()]


def _sum_over_prompts(
    blocks: Sequence[_Block], copies: int, rng: np.random.Generator | None = None
) -> np.ndarray:
    """The mean over prompts of the per-prompt statistic for ``copies`` labellings: the observed
    one (each block's first ``n`` samples are the reference's), or with ``rng`` that labelling
    shuffled within each prompt."""
    total: np.ndarray | float = 0.0
    for size, n, same in _by_shape(blocks):
        labels = np.zeros((len(same), copies, size))
        labels[:, :, :n] = 1.0
        found = _statistics(
            labels if rng is None else rng.permuted(labels, axis=2),
            np.stack([b.gram for b in same]),
            np.stack([b.column_sums for b in same]),
            np.array([b.total for b in same]),
            n,
        )
        total = total + found.sum(axis=0)
    return np.asarray(total) / len(blocks)


def _p_value(blocks: Sequence[_Block], permutations: int, seed: int) -> tuple[float, float]:
    observed = float(_sum_over_prompts(blocks, 1)[0])
    null = _sum_over_prompts(blocks, permutations, np.random.default_rng(seed))
    at_least = 1 + int((null >= observed - 1e-12).sum())  # ties count (float sums)
    return observed, at_least / (permutations + 1)


def mmd_test(
    reference: Samples,
    endpoint: Samples,
    *,
    length: int = DEFAULT_LENGTH,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> SampledTest:
    """Permutation MMD test of ``endpoint`` against ``reference``: each a mapping of prompt id
    to completions."""
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1 (got {permutations}); use e.g. 1000")
    blocks = _blocks(reference, endpoint, length)
    observed, p_value = _p_value(blocks, permutations, seed)
    n = sum(b.n for b in blocks)
    m = sum(len(b.gram) - b.n for b in blocks)
    return SampledTest(observed, p_value, permutations, (m, n), len(blocks))


# -- the planned power, on the fake's sampling model ----------------------------------------------


@lru_cache(maxsize=16)
def _model(temperature: float, top_p: float) -> tuple[np.ndarray, np.ndarray]:
    """The fake's sampling model as arrays: each vector's cumulative nucleus (padded with 1)
    and its words (padded with the last)."""
    from openrouter_probe.rules.sampling_model import TABLE_SIZE, VOCABULARY, nucleus

    width = len(VOCABULARY)
    cumulative = np.ones((TABLE_SIZE, width))
    words = np.zeros((TABLE_SIZE, width), dtype=np.int64)
    for v in range(TABLE_SIZE):
        c, w = nucleus(v, temperature, top_p)
        cumulative[v, : len(c)] = c
        words[v, : len(w)] = w
        words[v, len(w) :] = w[-1]
    return cumulative, words


def _model_draws(
    vectors: np.ndarray, temperature: float, top_p: float, n: int, rng: np.random.Generator
) -> np.ndarray:
    """``n`` completions (rows of word indices) of the prompt whose positions use ``vectors``."""
    cumulative, words = _model(temperature, top_p)
    u = rng.random((n, len(vectors)))
    picked = (u[:, :, None] > cumulative[vectors][None, :, :]).sum(axis=2)
    picked = np.minimum(picked, cumulative.shape[1] - 1)
    drawn: np.ndarray = words[vectors[None, :], picked]
    return drawn


@lru_cache(maxsize=256)
def simulated_power(
    *,
    prompts: int,
    n: int,
    temperature: float,
    top_p: float,
    factor: float,
    alpha: float,
    length: int = DEFAULT_LENGTH,
    simulations: int = 100,
    permutations: int = 200,
    seed: int = 0,
) -> float:
    """The share of ``simulations`` in which the test rejects at ``alpha``, with ``n`` samples per
    prompt and side over ``prompts`` prompts, the endpoint sampling at ``factor`` times
    ``temperature`` on the fake's sampling model (``rules.sampling_model``): the planned power (with
    ``factor=1``, the false-positive rate)."""
    from openrouter_probe.rules.sampling_model import TABLE_SIZE

    rng = np.random.default_rng(seed)
    hits = 0
    for sim in range(simulations):
        ref: dict[str, list[Completion]] = {}
        end: dict[str, list[Completion]] = {}
        for p in range(prompts):
            vectors = rng.integers(0, TABLE_SIZE, size=length)
            ref[str(p)] = list(_model_draws(vectors, temperature, top_p, n, rng))
            end[str(p)] = list(_model_draws(vectors, temperature * factor, top_p, n, rng))
        _, p_value = _p_value(_blocks(ref, end, length), permutations, seed * 7919 + sim)
        hits += p_value <= alpha
    return hits / simulations
