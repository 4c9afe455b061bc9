"""The sampling model the fake serves and the sampled arm's power is simulated on.

The fake's "model" gives every (prompt, position) fixed logits over a small vocabulary: one of
``TABLE_SIZE`` logit vectors drawn once (``LOGIT_SCALE`` standard normals each), picked by a hash
of the prompt and the position, so every endpoint has the same model. A request at temperature
``T > 0`` with ``top_p`` draws each of its first ``SAMPLED_WORDS`` answer words from
``softmax(logits / T)`` cut to the ``top_p`` nucleus, with the request's own random draws
(``sampled_words``; ``fake.content`` uses it, ``fake.degrade`` makes an endpoint sample hotter).
``verify.sampled.simulated_power`` draws from the same model (``nucleus``), so the power a plan
states is the power on the fake, an assumption about the real endpoints' distributions that
``docs/verify.md`` ("The sampled arm") spells out.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import math
import random
from functools import lru_cache

__all__ = [
    "ANSWER_TEXT",
    "LOGIT_SCALE",
    "SAMPLED_WORDS",
    "TABLE_SIZE",
    "VOCABULARY",
    "draw",
    "nucleus",
    "sampled_words",
    "vector_of",
]

#: The fake's answer text: its words, each once, are the vocabulary the sampled words come from.
ANSWER_TEXT = (
    "the model weighs each option and keeps the answer short while it checks the facts that "
    "matter most for this question so the reply stays clear useful and easy to verify against "
    "known results from earlier steps before it writes one final line"
)
VOCABULARY: tuple[str, ...] = tuple(dict.fromkeys(ANSWER_TEXT.split()))
#: The answer words drawn from the model (the rest of a longer answer is the usual text).
SAMPLED_WORDS = 32
#: Logit vectors in the model (a (prompt, position) picks one by hash).
TABLE_SIZE = 997
#: The standard deviation of a logit: at temperature 0.6 the most likely word has about half
#: the mass on average, at 1.0 about a quarter (``docs/verify.md``, "The sampled arm").
LOGIT_SCALE = 1.5


def _table() -> tuple[tuple[float, ...], ...]:
    rng = random.Random("openrouter-probe fake sampling model")
    return tuple(tuple(rng.gauss(0.0, LOGIT_SCALE) for _ in VOCABULARY) for _ in range(TABLE_SIZE))


_TABLE = _table()


def vector_of(prompt: str, position: int) -> int:
    """The index of the logit vector of word ``position`` for ``prompt`` (a hash of the
    conversation: the same on every endpoint)."""
    digest = hashlib.blake2b(f"{position}\n{prompt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % TABLE_SIZE


@lru_cache(maxsize=65536)
def nucleus(
    vector: int, temperature: float, top_p: float
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """The nucleus of one logit vector at ``temperature`` (> 0) and ``top_p``: cumulative
    probabilities and the words (indices into ``VOCABULARY``) they belong to, most likely
    first."""
    logits = _TABLE[vector]
    top = max(logits)
    weights = [math.exp((v - top) / temperature) for v in logits]
    total = sum(weights)
    order = sorted(range(len(weights)), key=lambda i: -weights[i])
    masses = list(itertools.accumulate(weights[i] / total for i in order))
    kept = order[: bisect.bisect_left(masses, top_p) + 1]  # up to the first that reaches top_p
    cumulative = list(itertools.accumulate(weights[i] for i in kept))
    return tuple(c / cumulative[-1] for c in cumulative), tuple(kept)


def draw(vector: int, temperature: float, top_p: float, u: float) -> int:
    """The word (an index into ``VOCABULARY``) that the uniform draw ``u`` picks from
    ``vector`` at ``temperature`` (> 0) and ``top_p``."""
    cumulative, words = nucleus(vector, temperature, top_p)
    return words[min(bisect.bisect_right(cumulative, u), len(words) - 1)]


def sampled_words(
    prompt: str, *, temperature: float, top_p: float, rng: random.Random, n: int
) -> tuple[str, ...]:
    """The first ``min(n, SAMPLED_WORDS)`` answer words of one request (each ``" word"``) to
    ``prompt`` (the conversation as text: its hash picks the model's logits)."""
    base = hashlib.blake2b(prompt.encode(), digest_size=8).hexdigest()
    return tuple(
        f" {VOCABULARY[draw(vector_of(base, i), temperature, top_p, rng.random())]}"
        for i in range(min(n, SAMPLED_WORDS))
    )
