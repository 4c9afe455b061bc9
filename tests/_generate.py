"""Test doubles for the generator: an in-process sender (no HTTP) that bills like OpenRouter.

``LedgerSender`` answers every body with a completion of a random length (seeded), priced at one of
the admitted endpoints' real prices from the bundled snapshot, and keeps a ledger of what it billed,
one entry per generation: the truth that the generator's records are compared with. A script of
failures (``fail``) makes chosen attempts answer with an error instead.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.run.send.transport import Answer, Failure, classify_error

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "policies" / "kimi-k2.5.yaml"
# Chutes, the first admitted endpoint of the K2.5 policy on the bundled snapshot: USD per token.
PRICE_IN = Decimal("0.00000045")
PRICE_OUT = Decimal("0.0000022")


def write_prompts(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def prompt_rows(n: int, *, datasets: int = 1, size: int = 40) -> list[dict[str, Any]]:
    return [
        {"id": f"r{i}", "dataset": f"d{i % datasets}", "prompt": f"question {i} " + "x" * size}
        for i in range(n)
    ]


@dataclass
class LedgerSender:
    """Answers in process; ``ledger`` holds (row id, generation id, cost) for every billed answer."""

    seed: int = 0
    yields: int = 3  # event-loop turns per request, so that requests interleave
    fail: Callable[[dict[str, Any], int], Failure | None] | None = None
    gate: asyncio.Event | None = None  # when set, requests wait for it (to be cancelled in flight)
    bodies: list[bytes] = field(default_factory=list)
    ledger: list[tuple[str, str, Decimal]] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    peak_in_flight: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def row_id(self, request: dict[str, Any]) -> str:
        return str(request["messages"][-1]["content"].split(" ")[1])

    async def __call__(self, body: bytes, *, stream: bool, **_: Any) -> Answer | Failure:
        self.bodies.append(body)
        request = json.loads(body)
        key = self.row_id(request)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            for _ in range(self._rng.randint(0, self.yields)):
                await asyncio.sleep(0)
            if self.gate is not None:
                await self.gate.wait()
            if self.fail is not None:
                failure = self.fail(request, self.attempts[key])
                if failure is not None:
                    return failure
            completion = self._rng.randint(1, request["max_tokens"])
            prompt = len(json.dumps(request["messages"])) // 4
            cost = prompt * PRICE_IN + completion * PRICE_OUT
            generation = f"gen-{len(self.ledger)}"
            self.ledger.append((key, generation, cost))
            return Answer(
                provider="Chutes",
                model="moonshotai/kimi-k2.5-0127",
                finish_reason="length" if completion == request["max_tokens"] else "stop",
                content=f"answer {key}",
                reasoning="thinking",
                usage={
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                    "cost": float(cost),
                    "completion_tokens_details": {"reasoning_tokens": completion // 2},
                },
                generation_id=generation,
            )
        finally:
            self.in_flight -= 1

    @property
    def billed_usd(self) -> Decimal:
        return sum((c for _, _, c in self.ledger), Decimal(0))


def http_failure(
    status: int,
    message: str = "Provider returned error",
    *,
    retry_after_s: float | None = None,
    **metadata: Any,
) -> Failure:
    """The failure of an HTTP error ``status`` (its ``Retry-After`` in seconds, if any)."""
    error = {"code": status, "message": message, "metadata": metadata}
    return classify_error(status, error, retry_after_s=retry_after_s)


async def no_sleep(seconds: float) -> None:
    """The injected retry wait: records nothing, waits for nothing (one loop turn)."""
    await asyncio.sleep(0)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def journal_reconciled(path: Path) -> dict[str, Decimal]:
    """What the journal at ``path`` settled from /generation: generation id -> cost."""
    gens: dict[tuple[str, int], str] = {}
    out: dict[str, Decimal] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if "gen" in item:
            gens[(item["run"], item["gen"])] = item["id"]
        elif "reconciled" in item:
            out[gens[(item["run"], item["reconciled"])]] = Decimal(item["cost_usd"])
    return out


def cache_job(out: Path) -> str:
    """The response cache's job salt of the output ``out``, as its journal's header holds it."""
    for line in Path(f"{out}.ledger").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if isinstance(item.get("cache_job"), str):
            return str(item["cache_job"])
    raise AssertionError(f"{out}: no cache_job in its journal")
