"""OpenRouter's response cache on for ``generate``, on the fake (loopback HTTP).

The docs (``guides/features/response-caching``): ``X-OpenRouter-Cache: true`` and
``X-OpenRouter-Cache-TTL`` (1-86400 s) ask for it; the key hashes the body, model, key and stream
mode; a hit is billed nothing, every usage counter 0, ``X-OpenRouter-Cache-Status: HIT``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openrouter_probe.api.completion import response_cache_headers
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.run.money.journal import journal_path
from openrouter_probe.run.money.replay import replay_journal
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.request import RequestBuilder, row_session
from tests._gated_clock import GatedClock
from tests._generate import POLICY, cache_job, no_sleep, prompt_rows, records, write_prompts
from tests.conftest import ROOT


def _gen(tmp: Path, base_url: str, **options: Any) -> Any:
    options.setdefault("sleep", no_sleep)
    options.setdefault("max_tokens", 100)
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            base_url=base_url,
            api_key="sk-cache",
            **options,
        )
    )


def test_the_headers_are_the_docs() -> None:
    assert response_cache_headers() == {
        "X-OpenRouter-Cache": "true",
        "X-OpenRouter-Cache-TTL": "86400",
    }
    with pytest.raises(ValueError):
        response_cache_headers(86401)


@pytest.mark.parametrize("stream", [False, True])
def test_every_request_asks_and_two_rows_with_one_prompt_are_two_requests(
    tmp_path: Path, stream: bool
) -> None:
    rows = [{"id": "a", "prompt": "same question"}, {"id": "b", "prompt": "same question"}]
    rows += prompt_rows(6)
    write_prompts(tmp_path / "prompts.jsonl", rows)
    with serve(speed=0, seed=3, record_requests=True) as fake:
        summary = _gen(tmp_path, fake.base_url, stream=stream, budget_usd=5)
        cache = fake.fake.response_cache
        sent = list(fake.fake.requests or [])
        assert summary.stop_reason == "done" and summary.ok + summary.truncated == 8
        # every request asked for the cache: the fake stored each whole answer under its key
        assert cache.stores == 8 and cache.hits == 0
        assert len(fake.ledger) == 8  # the two rows of one prompt were each generated and billed
        same = [b for b in sent if b["messages"][-1]["content"] == "same question"]
        assert len(same) == 2
        # (in the order they arrived, which concurrency decides)
        job = cache_job(tmp_path / "out.jsonl")  # the output's own salt, kept by a resume
        assert len(job) == 16
        assert {b["session_id"] for b in same} == {
            row_session("a", job=job),
            row_session("b", job=job),
        }
        assert {k: v for k, v in same[0].items() if k != "session_id"} == {
            k: v for k, v in same[1].items() if k != "session_id"
        }
        out = {r["id"]: r for r in records(tmp_path / "out.jsonl")}
        assert out["a"]["generation_id"] != out["b"]["generation_id"]
        assert "response_cache" not in out["a"]


def test_no_response_cache_sends_neither_the_header_nor_a_session(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    with serve(speed=0, seed=3, record_requests=True) as fake:
        summary = _gen(tmp_path, fake.base_url, response_cache=False)
        assert summary.stop_reason == "done"
        assert fake.fake.response_cache.stores == 0
        assert all("session_id" not in b for b in fake.fake.requests or [])


_BUILD = """
import json, sys
import inspect
from openrouter_probe.generation.job import generate
from openrouter_probe.generation.opening import _policy
from openrouter_probe.generation.plan import GeneratePlan
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.money.spend import Prices
compiled, raw, _ = _policy(sys.argv[1])
keywords = {name: p.default for name, p in inspect.signature(generate).parameters.items()
            if p.default is not inspect.Parameter.empty}
keywords.update(policy=sys.argv[1], out=sys.argv[2], max_tokens=100, dry_run=True)
builder = GeneratePlan.of("p.jsonl", **keywords).request_builder(compiled.model, raw,
                                                                  identity=True)
row = PromptRow("r7", "d0", [{"role": "user", "content": "question 7 \\u00e9"}], {}, 1)
sys.stdout.buffer.write(builder.build(row, Prices(0, 0)).body)
"""


def test_a_row_is_the_same_bytes_in_any_process(tmp_path: Path) -> None:
    """The body is a pure function of the run's settings and the row: two processes with
    different hash seeds build the very bytes (the cache's key)."""
    bodies = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", _BUILD, str(POLICY), str(tmp_path / "out.jsonl")],
            env=env,
            capture_output=True,
            check=True,
        )
        bodies.append(done.stdout)
    assert bodies[0] == bodies[1]
    body = json.loads(bodies[0])
    assert body["session_id"] == row_session("r7")
    # the model card's sampling (Kimi K2.5 thinks by default): sent explicitly
    assert (body["temperature"], body["top_p"]) == (1.0, 0.95)


@pytest.mark.slow
def test_a_row_resent_after_kill_9_is_answered_free(tmp_path: Path) -> None:
    """A child is killed with SIGKILL while its requests are in flight: the fake finishes them,
    bills them and keeps them in its cache; the resume sends the same bytes and is answered from
    the cache: the fake's ledger does not move, and the books count the hits at $0."""
    rows = 6
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(rows))
    options = {
        "prompts": str(tmp_path / "prompts.jsonl"),
        "policy": str(POLICY),
        "out": str(tmp_path / "out.jsonl"),
        "max_tokens": 60,
        "concurrency": rows,
        "budget_usd": "5",
        "api_key": "sk-cache",
    }
    clock = GatedClock()  # every answer held at the fake, after its headers, until the kill
    with serve(speed=1, seed=5, clock=clock) as fake:
        options["base_url"] = fake.base_url
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests._child", json.dumps(options)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        journal = journal_path(tmp_path / "out.jsonl")
        while _generation_ids(journal) < rows and time.monotonic() < deadline:
            # polling the journal (every answer's headers, and so its generation id, arrived)
            # not waiting for time: a kill before them leaves nothing to reconcile
            time.sleep(0.005)
        assert fake.fake._requests == rows
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        clock.release()
        out_path = tmp_path / "out.jsonl"
        before = {r["id"] for r in records(out_path)} if out_path.exists() else set()
        lost = rows - len(before)  # billed, never recorded: in flight at the kill
        assert lost >= 1, "every answer came before the kill: the fake's clock did not hold them"
        cache = fake.fake.response_cache
        while cache.stores < rows and time.monotonic() < deadline:
            time.sleep(0.01)  # the fake finishes what was in flight (a client gone or not)
        billed = fake.ledger.total_usd
        assert len(fake.ledger) == rows and billed > 0
        summary = asyncio.run(
            generate(
                options["prompts"],
                policy=POLICY,
                out=options["out"],
                max_tokens=60,
                concurrency=rows,
                budget_usd=5,
                base_url=fake.base_url,
                api_key="sk-cache",
                sleep=no_sleep,
            )
        )
        assert summary.stop_reason == "done"
        assert fake.ledger.total_usd == billed and len(fake.ledger) == rows  # the resend is free
        assert summary.cache_hits == lost and summary.killed_in_flight_before == lost
        out = [r for r in records(out_path) if r["id"] not in before]
        assert len(out) == lost
        assert all(r["response_cache"] == "hit" and r["cost_usd"] == 0 for r in out)
        assert all(r["usage"]["completion_tokens"] == 0 for r in out)
        assert all(r["content"] or r["reasoning"] for r in out)  # the answer itself, replayed
        # the killed attempts whose generation id the journal holds (the headers came before the
        # kill) are settled from /generation at what the fake billed for them; the rest stay at
        # their worst case: never under what was billed
        assert summary.spent_usd == 0 and summary.spent_total_usd >= billed
        assert summary.reconciled_before == lost
        assert summary.spent_total_usd == billed


@pytest.mark.slow
def test_attempts_killed_before_their_headers_are_settled_by_the_cache_hits_source(
    tmp_path: Path,
) -> None:
    """Issue 34: killed before any answer's headers (every first byte waits 2 s), the journal
    holds no generation id to settle the six attempts by; the resume's cache hits do: each hit's
    ``/generation`` record names the generation it replayed (``response_cache_source_id``), whose
    cost settles one killed attempt of the same row. The summed journal equals the fake's
    ledger, not just bounds it."""
    rows = 6
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(rows))
    options = {
        "prompts": str(tmp_path / "prompts.jsonl"),
        "policy": str(POLICY),
        "out": str(tmp_path / "out.jsonl"),
        "max_tokens": 60,
        "concurrency": rows,
        "budget_usd": "5",
        "api_key": "sk-cache",
    }
    clock = GatedClock()  # the 2 s first byte held until the kill, on any machine load
    with serve(speed=0, seed=5, faults="slow_first_byte=1/2", clock=clock) as fake:
        options["base_url"] = fake.base_url
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests._child", json.dumps(options)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while fake.fake._requests < rows and time.monotonic() < deadline:
            time.sleep(0.005)  # every request is at the fake, its headers held
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        clock.release()
        journal = journal_path(tmp_path / "out.jsonl")
        assert _generation_ids(journal) == 0  # nothing a /generation lookup could settle
        cache = fake.fake.response_cache
        while cache.stores < rows and time.monotonic() < deadline:
            time.sleep(0.01)  # the fake finishes (and bills, and caches) what was in flight
        billed = fake.ledger.total_usd
        assert len(fake.ledger) == rows and billed > 0
        summary = asyncio.run(
            generate(
                options["prompts"],
                policy=POLICY,
                out=options["out"],
                max_tokens=60,
                concurrency=rows,
                budget_usd=5,
                base_url=fake.base_url,
                api_key="sk-cache",
                sleep=no_sleep,
            )
        )
    assert summary.stop_reason == "done" and summary.cache_hits == rows
    assert summary.killed_in_flight_before == rows and summary.reconciled_before == rows
    assert summary.spent_usd == 0 and summary.possibly_billed_usd == 0
    assert summary.spent_total_usd == billed  # exactly what the fake billed
    replay = replay_journal(journal, repair=False)
    assert replay.spent_usd == billed and replay.possibly_billed_usd == 0


def _generation_ids(journal: Path) -> int:
    """How many generation ids a (live) journal holds so far."""
    try:
        return journal.read_text().count('{"gen":')
    except FileNotFoundError:
        return 0


def test_a_hit_on_the_fake_bills_nothing_and_replays_the_answer() -> None:
    import requests

    body = json.dumps(
        {"model": "moonshotai/kimi-k2.5", "messages": [{"role": "user", "content": "hi"}]}
    )
    with serve(speed=0, seed=1) as fake:
        headers = {"Authorization": "Bearer k", **response_cache_headers(60)}
        url = fake.base_url + "/chat/completions"
        first = requests.post(url, data=body, headers=headers, timeout=10)
        second = requests.post(url, data=body, headers=headers, timeout=10)
        other_key = requests.post(
            url, data=body, headers={**headers, "Authorization": "Bearer j"}, timeout=10
        )
        assert first.headers["X-OpenRouter-Cache-Status"] == "MISS"
        assert second.headers["X-OpenRouter-Cache-Status"] == "HIT"
        assert other_key.headers["X-OpenRouter-Cache-Status"] == "MISS"  # keyed by the key
        a, b = first.json(), second.json()
        assert a["id"] != b["id"]
        assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
        assert b["usage"]["cost"] == 0 and b["usage"]["prompt_tokens"] == 0
        assert len(fake.ledger) == 2  # the first and the other key's: the hit billed nothing
        assert fake.ledger.get(b["id"]) is None


def test_the_books_count_a_hit_at_zero_without_a_cost(tmp_path: Path) -> None:
    from openrouter_probe.run.books.books import Books
    from openrouter_probe.run.money.journal import Journal
    from openrouter_probe.run.money.spend import Prices, SpendCap
    from openrouter_probe.run.send.attempt import Attempt
    from openrouter_probe.run.send.transport import parse_body

    answer = parse_body(
        '{"id":"gen-1","provider":"Chutes","model":"m","choices":[{"finish_reason":"stop",'
        '"message":{"content":"x"}}],"usage":{"prompt_tokens":0,"completion_tokens":0,'
        '"total_tokens":0}}'
    )
    assert not isinstance(answer, Exception) and hasattr(answer, "cache_hit")
    answer.cache_hit = True  # type: ignore[union-attr]
    prices = Prices(Decimal("0.000001"), Decimal("0.000002"))
    row = PromptRow("r", "d", [{"role": "user", "content": "q"}], {}, 1)
    request = RequestBuilder(model="m", provider_json="{}").build(row, prices)
    attempt = Attempt(request, prices, '"r"', 60.0)
    with Journal(tmp_path / "out.jsonl.ledger") as journal:
        books = Books(SpendCap(Decimal(1)), datasets=["d"], journal=journal)
        assert books.reserve("d", attempt)
        books.settle(row, attempt, 1, answer, "gen-1", journaled=True)  # type: ignore[arg-type]
    assert attempt.cost == 0 and books.cap.spent_usd == 0 and books.counts.cache_hits == 1


def test_the_fake_keeps_only_200s_and_only_within_the_ttl() -> None:
    import requests

    from openrouter_probe.fake.clock import ManualClock

    clock = ManualClock(1_800_000_000.0)
    body = json.dumps(
        {"model": "moonshotai/kimi-k2.5", "messages": [{"role": "user", "content": "hi"}],
         "provider": {"only": ["chutes/int4"], "allow_fallbacks": False}}
    )  # fmt: skip
    with serve(speed=0, seed=1, clock=clock, faults="upstream_502=@1") as fake:
        headers = {"Authorization": "Bearer k", **response_cache_headers(60)}
        url = fake.base_url + "/chat/completions"
        failed = requests.post(url, data=body, headers=headers, timeout=10)
        assert failed.status_code == 502
        first = requests.post(url, data=body, headers=headers, timeout=10)
        assert first.headers["X-OpenRouter-Cache-Status"] == "MISS"  # the 502 was not kept
        clock.set(1_800_000_000.0 + 59)
        within = requests.post(url, data=body, headers=headers, timeout=10)
        clock.set(1_800_000_000.0 + 61)
        after = requests.post(url, data=body, headers=headers, timeout=10)
        assert within.headers["X-OpenRouter-Cache-Status"] == "HIT"
        assert after.headers["X-OpenRouter-Cache-Status"] == "MISS"  # the TTL ran out
        assert len(fake.ledger) == 2
