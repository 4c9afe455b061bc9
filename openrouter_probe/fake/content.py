"""What the fake model says: deterministic text, correct arithmetic, reasoning, logprobs, degradation.

An answer depends only on the messages, the server's seed and (when the temperature is above 0) the
request's number, never on the endpoint that serves it, so every endpoint answers alike unless it is
*degraded*: a degraded endpoint flips answer tokens and shifts logprobs at its rate, standing in for a
requantized deployment. Simple arithmetic questions ("What is 37 * 41?") are answered correctly, so
that accuracy can be measured against the fake. A token is one word-like piece of text.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from dataclasses import dataclass
from decimal import Decimal, DivisionByZero, InvalidOperation
from typing import Any

__all__ = ["Answer", "answer_for", "arithmetic_answer", "perturb"]

_ANSWER_TEXT = (
    "the model weighs each option and keeps the answer short while it checks the facts that "
    "matter most for this question so the reply stays clear useful and easy to verify against "
    "known results from earlier steps before it writes one final line"
)
_THINK_TEXT = (
    "let me work through this step by step first restate what is asked then check each part "
    "and confirm the result before answering"
)
_WORDS = tuple(_ANSWER_TEXT.split())
_THINK = tuple(_THINK_TEXT.split())
_ARITH = re.compile(
    r"(-?\d+(?:\.\d+)?)\s*([-+*/x×÷^]|\*\*|plus|minus|times|divided by)\s*(-?\d+(?:\.\d+)?)",
    re.IGNORECASE,
)
_OPS = {"x": "*", "×": "*", "÷": "/", "**": "^", "plus": "+", "minus": "-", "times": "*"}


@dataclass(frozen=True)
class Answer:
    """A generation: reasoning and answer tokens, why it stopped, and logprobs of answer tokens."""

    reasoning: tuple[str, ...]
    content: tuple[str, ...]
    finish_reason: str
    logprobs: tuple[float, ...]
    alternatives: tuple[tuple[str, ...], ...]

    @property
    def completion_tokens(self) -> int:
        return len(self.reasoning) + len(self.content)


def arithmetic_answer(text: str) -> str | None:
    """Return the result of the last ``A op B`` in ``text`` as text, or ``None`` when there is none.

    ``arithmetic_answer("What is 37 * 41?") == "1517"``; division gives up to 6 decimals.
    """
    found = list(_ARITH.finditer(text))
    if not found:
        return None
    a_text, op, b_text = found[-1].groups()
    op = _OPS.get(op.lower(), op.lower())
    if op == "divided by":
        op = "/"
    a, b = Decimal(a_text), Decimal(b_text)
    try:
        if op == "+":
            value = a + b
        elif op == "-":
            value = a - b
        elif op == "*":
            value = a * b
        elif op == "/":
            value = (a / b).quantize(Decimal("0.000001"))
        else:
            if abs(b) > 64 or b != b.to_integral_value():
                return None
            value = a ** int(b)
    except (DivisionByZero, InvalidOperation):
        return None
    text_value = (
        format(value.normalize(), "f") if value != value.to_integral_value() else str(int(value))
    )
    return text_value


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(
                    p["text"]
                    for p in content
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                )
    return ""


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _cycle(words: tuple[str, ...], seed: str, length: int = 8192) -> tuple[str, ...]:
    rng = random.Random(seed)
    return tuple(f" {rng.choice(words)}" for _ in range(length))


# Pseudo-random token streams computed once: an answer takes a slice at a seeded offset, so that
# composing a 300-token answer costs a slice, not 300 draws (the server's hot path).
_CONTENT_CYCLE = _cycle(_WORDS, "content")
_THINK_CYCLE = _cycle(_THINK, "think")
_ALT_RNG = random.Random("alternatives")
_ALT_CYCLE = tuple(tuple(f" {w}" for w in _ALT_RNG.sample(_WORDS, 4)) for _ in range(509))
_LOGPROB_CYCLE = tuple(-round(_ALT_RNG.random() * 0.05, 6) for _ in range(1021))


def _take(cycle: tuple[Any, ...], start: int, n: int) -> tuple[Any, ...]:
    """``n`` items of ``cycle`` from ``start``, wrapping around."""
    start %= len(cycle)
    out = cycle[start : start + n]
    while len(out) < n:
        out += cycle[: n - len(out)]
    return out


def answer_for(
    messages: list[Any],
    *,
    seed: int,
    nonce: int | None,
    max_tokens: int,
    reasoning: bool,
    reasoning_share: float,
    median_tokens: int,
) -> Answer:
    """Compose the answer to ``messages``: the same for the same messages and seed.

    ``nonce`` (the request's number) varies the answer only when the request's temperature is
    above 0; pass ``None`` otherwise. The length is drawn from a log-normal around
    ``median_tokens``, a ``reasoning_share`` of it reasoning (none when ``reasoning`` is off), and
    cut at ``max_tokens`` (reasoning first), which makes ``finish_reason`` ``"length"``.
    """
    key = json.dumps(messages, sort_keys=True, default=str)
    rng = _rng(key, seed, nonce)
    total = max(2, round(median_tokens * math.exp(0.6 * rng.gauss(0.0, 1.0))))
    n_reason = round(total * reasoning_share) if reasoning else 0
    offset = rng.getrandbits(32)
    question = _last_user_text(messages)
    result = arithmetic_answer(question)
    content: tuple[str, ...]
    if result is not None:
        match = list(_ARITH.finditer(question))[-1]
        content = (f" {match.group(1)}", f" {match.group(2)}", f" {match.group(3)}", " =")
        content += (f" {result}",)
        thought = tuple(f" {w}" for w in _THINK)[:n_reason]
    else:
        content = _take(_CONTENT_CYCLE, offset, max(1, total - n_reason))
        thought = ()
    reasoning_tokens = thought + _take(_THINK_CYCLE, offset, n_reason - len(thought))
    finish = "stop"
    if len(reasoning_tokens) + len(content) > max_tokens:
        finish = "length"
        reasoning_tokens = reasoning_tokens[:max_tokens]
        content = content[: max(0, max_tokens - len(reasoning_tokens))]
    return Answer(
        reasoning=reasoning_tokens,
        content=content,
        finish_reason=finish,
        logprobs=_take(_LOGPROB_CYCLE, offset, len(content)),
        alternatives=_take(_ALT_CYCLE, offset, len(content)),
    )


def _flip(token: str, rng: random.Random) -> str:
    digits = [i for i, ch in enumerate(token) if ch.isdigit()]
    if digits:
        i = rng.choice(digits)
        new = str((int(token[i]) + rng.randrange(1, 10)) % 10)
        return token[:i] + new + token[i + 1 :]
    words = [w for w in _WORDS if f" {w}" != token]
    return f" {rng.choice(words)}"


def perturb(answer: Answer, *, rate: float, key: tuple[object, ...]) -> Answer:
    """Degrade ``answer`` as a requantized endpoint would: each answer token flips with
    probability ``rate`` (a digit changes, a word is swapped) and every logprob drops by ``rate``
    nats plus the flip's own loss. Seeded by ``key``: the same request degrades the same way."""
    if rate <= 0:
        return answer
    rng = _rng(*key)
    content = list(answer.content)
    logprobs = [lp - rate for lp in answer.logprobs]
    for i, token in enumerate(content):
        if rng.random() < rate:
            content[i] = _flip(token, rng)
            logprobs[i] -= 1.0 + rng.random()
    return Answer(
        reasoning=answer.reasoning,
        content=tuple(content),
        finish_reason=answer.finish_reason,
        logprobs=tuple(round(lp, 6) for lp in logprobs),
        alternatives=answer.alternatives,
    )
