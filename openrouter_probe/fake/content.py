"""What the fake model says: deterministic text, arithmetic, tool calls, reasoning, logprobs
(``answer_for``), and the ways an endpoint can be made to say it differently, each at a rate
(``docs/fake-server.md``'s options): ``perturb`` (``--degrade``), ``flip`` (``--degrade-flip``),
``break_tools`` (``--degrade-tools``) and ``noisy`` (``--noise``).

An answer never depends on the endpoint that serves it, so every endpoint answers alike unless it
is degraded. A token is one word-like piece of text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import operator
import random
import re
from dataclasses import dataclass
from decimal import Decimal, DivisionByZero, InvalidOperation
from typing import Any

from openrouter_probe.fake.tool_calls import tool_call_for
from openrouter_probe.rules.sampling_model import ANSWER_TEXT, sampled_words

__all__ = [
    "Answer",
    "answer_for",
    "arithmetic_answer",
    "at_limit",
    "break_tools",
    "flip",
    "noisy",
    "perturb",
]

_THINK_TEXT = (
    "let me work through this step by step first restate what is asked then check each part "
    "and confirm the result before answering"
)
_WORDS = tuple(ANSWER_TEXT.split())
_THINK = tuple(_THINK_TEXT.split())
_ARITH = re.compile(
    r"(-?\d+(?:\.\d+)?)\s*([-+*/x×÷^]|\*\*|plus|minus|times|divided by)\s*(-?\d+(?:\.\d+)?)",
    re.IGNORECASE,
)
_OPS = {"x": "*", "×": "*", "÷": "/", "**": "^", "plus": "+", "minus": "-", "times": "*"}
_APPLY = {"+": operator.add, "-": operator.sub, "*": operator.mul}


#: A tool call as the fake makes it: (call id, function name, arguments as a JSON string).
ToolCallText = tuple[str, str, str]


@dataclass(frozen=True)
class Answer:
    """A generation: reasoning and answer tokens, why it stopped, logprobs of answer tokens, and
    tool calls (with the tokens their arguments count for).

    ``item_u`` is an arithmetic item's fixed draw in [0, 1) (``None`` for anything else) and
    ``other`` the result token a flip swaps in (the right one where the model is wrong, a wrong one
    where it is right); ``call`` is the parsed call behind ``tool_calls`` with its schema.
    """

    reasoning: tuple[str, ...]
    content: tuple[str, ...]
    finish_reason: str | None  # None: cut at max_tokens the xAI way (``at_limit``)
    logprobs: tuple[float, ...]
    alternatives: tuple[tuple[str, ...], ...]
    tool_calls: tuple[ToolCallText, ...] = ()
    tool_tokens: int = 0
    item_u: float | None = None
    other: str | None = None
    call: tuple[str, dict[str, Any], dict[str, Any]] | None = None

    @property
    def completion_tokens(self) -> int:
        return len(self.reasoning) + len(self.content) + self.tool_tokens

    @property
    def output_tokens(self) -> int:
        """What the answer bills beyond reasoning: its content and its tool calls."""
        return len(self.content) + self.tool_tokens


def arithmetic_answer(text: str) -> str | None:
    """Return the result of the last ``A op B`` in ``text`` as text, or ``None`` when there is none.

    ``arithmetic_answer("What is 37 * 41?") == "1517"``; division gives up to 6 decimals.
    """
    found = list(_ARITH.finditer(text))
    if not found:
        return None
    a_text, op, b_text = found[-1].groups()
    op = _OPS.get(op.lower(), op.lower())
    op = "/" if op == "divided by" else op
    a, b = Decimal(a_text), Decimal(b_text)
    try:
        if op in _APPLY:
            value = _APPLY[op](a, b)
        elif op == "/":
            value = (a / b).quantize(Decimal("0.000001"))
        elif abs(b) > 64 or b != b.to_integral_value():
            return None
        else:
            value = a ** int(b)
    except (DivisionByZero, InvalidOperation):
        return None
    return format(value.normalize(), "f") if value != value.to_integral_value() else str(int(value))


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


def _unit_draw(*parts: object) -> float:
    """A fixed draw in [0, 1) for ``parts`` (the same on every endpoint and every run)."""
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _wrong(result: str) -> str:
    """A wrong result: the last digit moved by one (the same wrong number every time)."""
    last = result[-1]
    return result[:-1] + str((int(last) + 1) % 10) if last.isdigit() else result + "1"


def answer_for(
    messages: list[Any],
    *,
    seed: int,
    nonce: int | None,
    max_tokens: int,
    reasoning: bool,
    reasoning_share: float,
    reasoning_budget: int | None = None,
    median_tokens: int,
    tools: list[Any] | None = None,
    hard: float = 0.0,
    temperature: float = 0.0,
    top_p: float = 1.0,
) -> Answer:
    """Compose the answer to ``messages``: the same for the same messages, tools and seed.

    ``nonce`` (the request's number) varies the answer only when the request's temperature is
    above 0; pass ``None`` otherwise. Free text at a ``temperature`` above 0 (with ``top_p``)
    begins with words drawn from the sampling model (``rules.sampling_model``). The length is
    drawn from a log-normal around ``median_tokens``, a ``reasoning_share`` of it reasoning (none
    when ``reasoning`` is off, at most ``reasoning_budget``: the request's ``reasoning.max_tokens``,
    the answer keeping its length), and cut at ``max_tokens`` (reasoning first), which makes
    ``finish_reason`` ``"length"``. An
    arithmetic question is answered wrong on a ``hard`` share of items (the same ones, the same
    wrong number, on every endpoint); a request with ``tools`` that names one is answered with a
    call (``finish_reason`` ``"tool_calls"``).
    """
    key = json.dumps(messages, sort_keys=True, default=str)
    rng = _rng(key, seed, nonce)
    total = max(2, round(median_tokens * math.exp(0.6 * rng.gauss(0.0, 1.0))))
    n_reason = round(total * reasoning_share) if reasoning else 0
    if reasoning_budget is not None and n_reason > reasoning_budget:
        total, n_reason = total - n_reason + reasoning_budget, reasoning_budget
    offset = rng.getrandbits(32)
    question = _last_user_text(messages)
    call = tool_call_for(question, tools) if tools else None
    result = None if call is not None else arithmetic_answer(question)
    content: tuple[str, ...]
    item_u = other = None
    if call is not None:
        content = ()
        thought = tuple(f" {w}" for w in _THINK)[:n_reason]
    elif result is not None:
        item_u = _unit_draw("item", question, seed)
        right, wrong = result, _wrong(result)
        said, other = (wrong, right) if item_u >= 1.0 - hard else (right, wrong)
        match = list(_ARITH.finditer(question))[-1]
        content = (f" {match.group(1)}", f" {match.group(2)}", f" {match.group(3)}", " =")
        content += (f" {said}",)
        thought = tuple(f" {w}" for w in _THINK)[:n_reason]
    else:
        content = _take(_CONTENT_CYCLE, offset, max(1, total - n_reason))
        if nonce is not None and temperature > 0:  # drawn from ``rules.sampling_model``
            head = sampled_words(key, temperature=temperature, top_p=top_p, rng=rng, n=len(content))
            content = head + content[len(head) :]
        thought = ()
    reasoning_tokens = thought + _take(_THINK_CYCLE, offset, n_reason - len(thought))
    finish = "stop" if call is None else "tool_calls"
    answer = Answer(
        reasoning=reasoning_tokens,
        content=content,
        finish_reason=finish,
        logprobs=_take(_LOGPROB_CYCLE, offset, len(content)),
        alternatives=_take(_ALT_CYCLE, offset, len(content)),
        item_u=item_u,
        other=None if other is None else f" {other}",
    )
    if call is not None:
        answer = _with_call(
            answer, call, call_id=f"call_{hashlib.sha256(key.encode()).hexdigest()[:24]}"
        )
    return _cut(answer, max_tokens)


def at_limit(answer: Answer, max_tokens: int) -> Answer:
    """The answer as xAI sends one cut at ``max_tokens``: its content run on to the limit, then
    ``finish_reason: null`` (no tool call: the answer was cut)."""
    keep = max(0, max_tokens - len(answer.reasoning))
    more = _take(_CONTENT_CYCLE, len(answer.content), max(0, keep - len(answer.content)))
    return _text(answer, (answer.content + more)[:keep], None)


def _text(answer: Answer, content: tuple[str, ...], finish: str | None, **more: Any) -> Answer:
    """``answer`` saying ``content`` and no tool call (logprobs and alternatives from the cycles'
    start unless ``more`` gives them)."""
    if "logprobs" not in more:
        more["logprobs"] = _take(_LOGPROB_CYCLE, 0, len(content))
        more["alternatives"] = _take(_ALT_CYCLE, 0, len(content))
    return dataclasses.replace(
        answer,
        content=content,
        finish_reason=finish,
        tool_calls=(),
        tool_tokens=0,
        call=None,
        **more,
    )


def _cut(answer: Answer, max_tokens: int) -> Answer:
    """Cut at ``max_tokens`` (reasoning first): ``finish_reason`` becomes ``"length"`` and a tool
    call that does not fit is not made (no call is left for a degradation or the noise to
    change)."""
    if answer.completion_tokens <= max_tokens:
        return answer
    reasoning = answer.reasoning[:max_tokens]
    n = max(0, max_tokens - len(reasoning))
    return _text(
        answer,
        answer.content[:n],
        "length",
        reasoning=reasoning,
        logprobs=answer.logprobs[:n],
        alternatives=answer.alternatives[:n],
    )


# --- tool calls (the call read from the text: ``fake.tool_calls``) ---------------------------


def _with_call(
    answer: Answer, call: tuple[str, dict[str, Any], dict[str, Any]], *, call_id: str
) -> Answer:
    name, arguments, _ = call
    text = json.dumps(arguments, ensure_ascii=False)
    return dataclasses.replace(
        answer,
        content=(),
        logprobs=(),
        alternatives=(),
        finish_reason="tool_calls",
        tool_calls=((call_id, name, text),),
        tool_tokens=max(1, (len(name) + len(text)) // 4),
        call=call,
    )


def _altered(
    arguments: dict[str, Any], schema: dict[str, Any], rng: random.Random
) -> dict[str, Any]:
    """One argument value changed, the schema still met: another enum value, a number moved by one,
    a code's letter or a date's day changed, a word added to a free string."""
    properties = schema.get("properties") or {}
    keys = [k for k in arguments if isinstance(properties.get(k), dict)]
    if not keys:
        return arguments
    key = rng.choice(keys)
    spec, value = properties[key], arguments[key]
    out = dict(arguments)
    if isinstance(spec.get("enum"), list) and len(spec["enum"]) > 1:
        out[key] = rng.choice([v for v in spec["enum"] if v != value])
    elif isinstance(value, bool):
        out[key] = not value
    elif isinstance(value, int | float):
        maximum = spec.get("maximum")
        out[key] = value - 1 if maximum is not None and value + 1 > maximum else value + 1
    elif isinstance(value, str) and re.fullmatch(r"[A-Z]{3}", value):
        out[key] = value[:2] + chr((ord(value[2]) - 65 + 1) % 26 + 65)
    elif isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        day = int(value[-2:])
        out[key] = f"{value[:-2]}{day % 28 + 1:02d}"
    elif isinstance(value, str):
        out[key] = f"{value} {rng.choice(_WORDS)}"
    elif isinstance(value, list):
        out[key] = [*value, rng.choice(_WORDS)]
    return out


def _recall(answer: Answer, arguments: dict[str, Any]) -> Answer:
    assert answer.call is not None and answer.tool_calls
    name, _, schema = answer.call
    return _with_call(answer, (name, arguments, schema), call_id=answer.tool_calls[0][0])


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
    nats plus the flip's own loss; a tool call's arguments change (one value) with probability
    ``rate``. Seeded by ``key``: the same request degrades the same way."""
    if rate <= 0:
        return answer
    rng = _rng(*key)
    if answer.call is not None:
        if rng.random() >= rate:
            return answer
        return _recall(answer, _altered(answer.call[1], answer.call[2], rng))
    content = list(answer.content)
    logprobs = [lp - rate for lp in answer.logprobs]
    for i, token in enumerate(content):
        if rng.random() < rate:
            content[i] = _flip(token, rng)
            logprobs[i] -= 1.0 + rng.random()
    return dataclasses.replace(
        answer, content=tuple(content), logprobs=tuple(round(lp, 6) for lp in logprobs)
    )


def flip(answer: Answer, *, rate: float) -> Answer:
    """Give an arithmetic item's other result on a band of items: those whose draw is below
    ``rate`` (the model is right there: now wrong) and those at ``1 - rate`` or above (the model is
    wrong there when ``hard >= rate``: now right). The same accuracy, other answers."""
    u = answer.item_u
    if rate <= 0 or u is None or answer.other is None or not answer.content:
        return answer
    if rate <= u < 1.0 - rate:
        return answer
    return dataclasses.replace(answer, content=(*answer.content[:-1], answer.other))


def break_tools(answer: Answer, *, rate: float, key: tuple[object, ...]) -> Answer:
    """With probability ``rate``, break a tool call: half the time its arguments miss a required
    key or carry a wrong type (schema-invalid), half the time no call is made (a text answer)."""
    if rate <= 0 or answer.call is None:
        return answer
    rng = _rng("tools", *key)
    if rng.random() >= rate:
        return answer
    _, arguments, schema = answer.call
    if rng.random() < 0.5:
        return _text(answer, _take(_CONTENT_CYCLE, rng.getrandbits(32), 12), "stop")
    broken = dict(arguments)
    required = [k for k in schema.get("required") or () if k in broken]
    if required and rng.random() < 0.5:
        del broken[rng.choice(required)]
    elif broken:
        key_name = rng.choice(sorted(broken))
        broken[key_name] = [broken[key_name]]  # an array where the schema wants a scalar
    else:
        broken["unexpected"] = True
    return _recall(answer, broken)


def noisy(answer: Answer, draw: float, *, rate: float) -> Answer:
    """Nondeterminism at temperature 0: when ``draw`` (the request's own, in [0, 1)) is below
    ``rate``, the final answer token changes (a digit, or a word), or one argument of a tool call."""
    if draw >= rate:
        return answer
    rng = random.Random(int(draw * 2**52))
    if answer.call is not None:
        return _recall(answer, _altered(answer.call[1], answer.call[2], rng))
    if not answer.content:
        return answer
    return dataclasses.replace(
        answer, content=(*answer.content[:-1], _flip(answer.content[-1], rng))
    )
