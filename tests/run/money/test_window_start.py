"""Where a run's in-flight dollar window starts: what the account allows (``GET /credits``' balance,
at most what the key's blocking budget has left), read before the first request; a first probe
at ``START_REQUESTS`` requests, then the concurrency (or the balance) once OpenRouter admitted
them all (their 200 status, before any answer) or at the first answer, when no in-flight 402 came; the last run's window on a resume (its ``window`` journal line). The
dry run and the summary say which start was taken and why."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.errors import Message
from openrouter_probe.fake import ManualClock, serve
from openrouter_probe.generation import generate
from openrouter_probe.run.checks import key_check
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.money.limit import START_REQUESTS, WindowStart, window_start
from openrouter_probe.run.money.replay import replay_journal
from openrouter_probe.run.report import render_result
from tests._generate import POLICY, no_sleep, prompt_rows, records, write_prompts

W = Decimal("0.001")  # one request's worst case


@pytest.fixture(autouse=True)
def _no_management_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENROUTER_MANAGEMENT_KEY", raising=False)


def _code(note: str) -> str:
    assert isinstance(note, Message), note
    return note.code


def _round_trips(start: WindowStart, concurrency: int, rounds: int, budget: int | None) -> list:
    """In flight per round trip: each round every worker that the window admits sends (at most
    ``concurrency``), then every answer comes back; OpenRouter refuses what is past ``budget``
    requests (``None``: no in-flight budget), before any answer (it refuses before serving)."""
    window = start.window()
    sent = []
    for _ in range(rounds):
        flying = 0
        while flying < concurrency and window.admits(W * flying, flying, W):
            flying += 1
        held = min(flying, budget) if budget is not None else flying
        for refused in range(flying - held):
            window.refused(W * (held + refused), held + refused, W)
        for _ in range(held):
            window.on_success(W)
        sent.append(flying)
    return sent


# -- where it starts ----------------------------------------------------------------------------


def test_a_balance_that_covers_the_concurrency_opens_it_after_the_first_round_trip() -> None:
    start = window_start(concurrency=2000, worst_usd=W, balance_usd=Decimal(50))
    assert _code(start.why) == "window-at-concurrency"
    assert "then concurrency=2000 once OpenRouter admits them" in start.why
    assert "$50.00" in start.why and "$0.001000 each" in start.why
    # no in-flight budget: 16 in the first round trip, 2,000 from the second on
    assert _round_trips(start, 2000, 3, None) == [START_REQUESTS, 2000, 2000]


def test_a_refusal_in_the_first_round_trip_keeps_the_window_learning() -> None:
    start = window_start(concurrency=200, worst_usd=W, balance_usd=Decimal(50))
    # a budget of ten requests: the probe's six refused come back before any answer, so the
    # window never opens at 200; it shrinks and then grows about one request per round trip
    sent = _round_trips(start, 200, 6, 10)
    assert sent[0] == START_REQUESTS and max(sent[1:]) <= START_REQUESTS


def _probe(start: WindowStart, concurrency: int) -> tuple[Any, int]:
    """The window and how many requests it lets go at once (at most ``concurrency``)."""
    window, flying = start.window(), 0
    while flying < concurrency and window.admits(W * flying, flying, W):
        flying += 1
    return window, flying


def _more(window: Any, flying: int, concurrency: int) -> int:
    """How many more requests the window lets go beside ``flying`` in flight."""
    more = 0
    while flying + more < concurrency and window.admits(W * (flying + more), flying + more, W):
        more += 1
    return more


def test_the_probe_admitted_whole_opens_the_window_before_any_answer() -> None:
    start = window_start(concurrency=2000, worst_usd=W, balance_usd=Decimal(50))
    window, flying = _probe(start, 2000)
    assert flying == START_REQUESTS
    for _ in range(flying - 1):  # OpenRouter's 200 status for all but one of the probe
        window.admitted()
    assert _more(window, flying, 2000) == 0  # one may still be refused: the window waits
    window.admitted()
    assert _more(window, flying, 2000) == 2000 - flying  # every one admitted, none answered


def test_a_refusal_in_the_probe_keeps_its_admissions_from_opening_the_window() -> None:
    start = window_start(concurrency=200, worst_usd=W, balance_usd=Decimal(50))
    window, flying = _probe(start, 200)
    for _ in range(10):  # an in-flight budget of ten requests: ten admitted, six refused
        window.admitted()
    for refused in range(flying - 10):
        window.refused(W * (10 + refused), 10 + refused, W)
    window.admitted()  # (a late status changes nothing)
    assert window.learned and _more(window, 10, 200) == 0
    window.on_success(W)  # nor does the first answer: the window learns from here
    assert _more(window, 9, 200) <= 1


def test_a_balance_that_covers_fewer_opens_at_the_balance() -> None:
    start = window_start(concurrency=200, worst_usd=W, balance_usd=Decimal("0.05"))
    assert _code(start.why) == "window-at-balance"
    assert "covers once OpenRouter admits them with no in-flight 402: 50 of" in start.why
    assert _round_trips(start, 200, 2, None) == [START_REQUESTS, 50]
    few = window_start(concurrency=200, worst_usd=W, balance_usd=Decimal("0.005"))
    assert _round_trips(few, 200, 2, None) == [5, 5]
    overdrawn = window_start(concurrency=200, worst_usd=W, balance_usd=Decimal("-1"))
    assert _round_trips(overdrawn, 200, 2, None) == [1, 1]  # one alone always goes


def test_an_unread_balance_is_the_slow_start_and_says_why() -> None:
    start = window_start(concurrency=200, worst_usd=W, balance_usd=None, unread="GET /credits 401")
    assert _code(start.why) == "window-slow-start"
    assert start.why.endswith("until OpenRouter's first in-flight 402 (GET /credits 401)")
    assert _round_trips(start, 200, 4, None) == [16, 32, 64, 128]


def test_a_resume_starts_at_the_last_window_learned() -> None:
    start = window_start(
        concurrency=200, worst_usd=W, balance_usd=Decimal(50), resumed_usd=Decimal("0.0125")
    )
    assert _code(start.why) == "window-resumed" and start.learned
    assert "starts at $0.0125" in start.why and "about 12 requests" in start.why
    sent = _round_trips(start, 200, 3, None)
    assert sent[0] == 12 and sent[1] <= 13  # learned: about one request more per round trip


def _account(budget: int, concurrency: int = 200, rows: int = 300) -> tuple[int, int, float]:
    """``rows`` rows at ``concurrency`` on an account whose balance ($50) covers the concurrency
    and whose in-flight budget holds ``budget`` requests, round trip by round trip (refusals come
    back first, a refused row goes again the next round trip): the attempts, the in-flight 402s,
    and the mean held once the window learned, as a share of the budget."""
    window = window_start(concurrency=concurrency, worst_usd=W, balance_usd=Decimal(50)).window()
    left, attempts, refusals, held_shares = rows, 0, 0, []
    while left:
        flying = 0
        while flying < min(concurrency, left) and window.admits(W * flying, flying, W):
            flying += 1
        attempts += flying
        held = min(flying, budget)
        for _ in range(flying - held):
            refusals += 1
            window.refused(W * held, held, W)
        for _ in range(held):
            window.on_success(W)
        left -= held
        if window.learned:
            held_shares.append(held / budget)
    return attempts, refusals, sum(held_shares) / len(held_shares)


def test_a_budget_of_ten_requests_is_learned_in_the_probe() -> None:
    attempts, refusals, held = _account(10)
    assert attempts == 300 + refusals  # every row finishes; a refusal is sent again
    assert refusals / attempts <= 0.05  # 13 of 313
    assert held >= 0.8  # once learned, 88% of the budget held on average
    # what the probe cannot see: a budget between it and the concurrency takes the second round
    # trip's burst (refused, never billed: each waits its Retry-After), then is learned
    attempts, refusals, _ = _account(20)
    assert refusals == 181 and attempts == 481


# -- what the account says ----------------------------------------------------------------------


def _options(base_url: str, **kw: Any) -> RunPlan:
    return RunPlan.resolve(
        command="generate", out="unused.jsonl", inputs=[], base_url=base_url, **kw
    )


def test_the_balance_is_read_from_credits_at_most_the_keys_budget(tmp_path: Path) -> None:
    with serve(speed=0, credit_usd=20) as fake:
        read = key_check(_options(fake.base_url, budget_usd=1))
    assert read.balance_usd == Decimal(20) and read.unread == ""
    with serve(speed=0, credit_usd=20, key_limit_usd=3) as fake:
        read = key_check(_options(fake.base_url, budget_usd=1))
    assert read.balance_usd == Decimal(3)  # the key's limit blocks first


def test_credits_need_the_management_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(speed=0, credit_usd=20, management_key="sk-or-mgmt") as fake:
        unread = key_check(_options(fake.base_url, budget_usd=1))
        monkeypatch.setenv("OPENROUTER_MANAGEMENT_KEY", "sk-or-mgmt")
        read = key_check(_options(fake.base_url, budget_usd=1))
    assert unread.balance_usd is None
    assert unread.unread == (
        "GET /credits answered 401: it needs a management key in OPENROUTER_MANAGEMENT_KEY"
    )
    assert read.balance_usd == Decimal(20) and read.unread == ""


# -- end to end ---------------------------------------------------------------------------------


def _gen(tmp: Path, base_url: str, **options: Any) -> Any:
    options.setdefault("sleep", no_sleep)
    options.setdefault("max_tokens", 200)
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            base_url=base_url,
            **options,
        )
    )


def _window_note(summary: Any) -> Message:
    found = [n for n in summary.notes if isinstance(n, Message) and n.code.startswith("window-")]
    assert len(found) == 1, summary.notes
    return found[0]


def test_the_run_and_its_dry_run_say_where_the_window_starts(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))
    with serve(speed=0, seed=3) as fake:
        plan = _gen(tmp_path, fake.base_url, concurrency=30, budget_usd=5, dry_run=True)
        summary = _gen(tmp_path, fake.base_url, concurrency=30, budget_usd=5)
    assert _window_note(plan).code == _window_note(summary).code == "window-at-concurrency"
    assert "then concurrency=30 once OpenRouter admits them" in _window_note(summary)
    assert "then --concurrency 30 once OpenRouter admits them" in render_result(
        plan, lambda name, value, given: f"--{name} {value}" if given else f"--{name}"
    )
    assert summary.ok + summary.truncated == 40
    assert "in flight: 16 requests, then concurrency=30" in render_result(summary)
    # no in-flight 402: nothing learned, no window line in the journal
    assert replay_journal(tmp_path / "out.jsonl.ledger").window_usd is None
    (tmp_path / "out.jsonl").unlink()
    (tmp_path / "out.jsonl.ledger").unlink()
    offline = _gen(tmp_path, fake.base_url, concurrency=30, budget_usd=5, offline=True)
    assert _window_note(offline).code == "window-slow-start"
    assert "(offline: the account is not read)" in _window_note(offline)


def test_a_resume_starts_where_the_in_flight_402s_left_the_window(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(60))
    clock = ManualClock(time.time())

    async def moving(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    with serve(
        speed=0, seed=3, in_flight_usd=Decimal("0.004"), in_flight_settle_s=2.0, clock=clock
    ) as fake:
        first = _gen(
            tmp_path, fake.base_url, concurrency=40, budget_usd=5, sleep=moving, clock=clock.now
        )
        assert first.in_flight_refusals >= 1
        journal = tmp_path / "out.jsonl.ledger"
        lines = [json.loads(x) for x in journal.read_text().splitlines()]
        windows = [Decimal(x["window"]) for x in lines if "window" in x]
        assert windows and all(w > 0 for w in windows)
        assert replay_journal(journal).window_usd == windows[-1]
        write_prompts(tmp_path / "prompts.jsonl", prompt_rows(80))  # 20 more rows
        second = _gen(
            tmp_path, fake.base_url, concurrency=40, budget_usd=5, sleep=moving, clock=clock.now
        )
    note = _window_note(second)
    assert note.code == "window-resumed" and note.values["window"] == windows[-1]
    assert second.rows_already_done == 60 and second.ok + second.truncated == 20
    assert len(records(tmp_path / "out.jsonl")) == 80


class RoundTrips:
    """The fake's clock, gating each request once: its first wait holds it until the test lets
    the round trip end (``release``); its other waits pass. The run's requests in flight are the
    ones held (``held``); ``wait_held`` waits (in a thread) until that many are."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.held = 0
        self.rounds: list[int] = []  # what each round trip held when it ended
        self._passed: set[int] = set()
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.open = False

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        task = id(asyncio.current_task())
        if self.open or task in self._passed:
            return
        self._passed.add(task)
        self._loop = asyncio.get_running_loop()
        if self._event is None:
            self._event = asyncio.Event()
        event = self._event
        with self._cond:
            self.held += 1
            self._cond.notify_all()
        await event.wait()

    def wait_held(self, count: int) -> bool:
        with self._cond:  # (the guard fails the test only if the run never gets there)
            return self._cond.wait_for(lambda: self.held >= count, timeout=120)

    def release(self, *, for_good: bool = False) -> None:
        """End this round trip: every request held is answered."""
        with self._cond:
            self.rounds.append(self.held)
            self.held = 0
        event, self._event = self._event, None
        self.open = self.open or for_good
        assert self._loop is not None and event is not None
        self._loop.call_soon_threadsafe(event.set)


def test_on_the_fake_in_flight_reaches_the_concurrency_before_the_first_answer(
    tmp_path: Path,
) -> None:
    # prompts of one size: one worst case, so that the probe holds 16 of them
    rows = [{"id": f"r{i:03d}", "prompt": f"question {i:03d} " + "x" * 40} for i in range(300)]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    gate = RoundTrips()

    async def both(base_url: str) -> Any:
        async def drive() -> None:
            # the fake sends each 200 status (and padding) at once and holds every answer: the
            # probe's statuses, with no in-flight 402, open the window before any answer
            assert await asyncio.to_thread(gate.wait_held, 200)
            gate.release(for_good=True)

        run = generate(
            tmp_path / "prompts.jsonl",
            policy=POLICY,
            out=tmp_path / "out.jsonl",
            base_url=base_url,
            sleep=no_sleep,
            concurrency=200,
            budget_usd=50,
            max_tokens=200,
        )
        summary, _ = await asyncio.gather(run, drive())
        return summary

    with serve(speed=1, seed=3, clock=gate) as fake:  # no in-flight budget
        summary = asyncio.run(both(fake.base_url))
    assert gate.rounds == [200]
    assert summary.ok + summary.truncated == 300 and summary.in_flight_refusals == 0
    assert _window_note(summary).code == "window-at-concurrency"
