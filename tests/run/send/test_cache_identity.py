"""The response cache's identity of a request: (row, sample, attempt kind), carried in the body's
``session_id`` (the documented key hashes the body). A resend of the same attempt is answered from
the cache at $0; a new sample, a redo of a cut answer, or a retry after a bad answer is a request
of its own, paid, never a cached replay. On the fake, which keys its cache as the docs say."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import requests

from openrouter_probe.api.completion import response_cache_headers
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.rows import PromptRow
from openrouter_probe.run.send.request import RequestBuilder, row_session
from tests._generate import POLICY, cache_job, no_sleep, records, write_prompts

KEY = "sk-identity"


def _gen(tmp: Path, base_url: str, **options: Any) -> Any:
    options.setdefault("max_tokens", 100)
    return asyncio.run(
        generate(tmp / "p.jsonl", policy=POLICY, out=tmp / "out.jsonl", base_url=base_url,
                 api_key=KEY, sleep=no_sleep, budget_usd=5, **options)
    )  # fmt: skip


def _resend(base_url: str, body: dict[str, Any]) -> requests.Response:
    """The very request again, as a resume after a kill sends it."""
    headers = {"Authorization": f"Bearer {KEY}", **response_cache_headers()}
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    return requests.post(base_url + "/chat/completions", data=data, headers=headers, timeout=10)


def test_the_identity_is_row_sample_and_attempt_kind() -> None:
    builder = RequestBuilder(model="m", provider_json="{}", identity=True)
    row = PromptRow("a#1", "d", [{"role": "user", "content": "q"}], {}, 1)

    def session(r: PromptRow) -> str:
        return str(json.loads(builder.build(r, Prices(0, 0)).body)["session_id"])

    redo = PromptRow("a#1", "d", row.messages, {}, 1, cache_kind="redo:gen-1")
    retry = PromptRow("a#1", "d", row.messages, {}, 1, cache_kind="redo:gen-1/retry-1")
    other = PromptRow("a#2", "d", row.messages, {}, 1)
    sessions = [session(r) for r in (row, redo, retry, other)]
    assert len(set(sessions)) == 4
    assert sessions[0] == row_session("a#1") and session(redo) == sessions[1]  # stable
    assert len(sessions[1]) == len(sessions[0])  # the same bytes to reserve for


def test_three_samples_are_three_answers_and_a_resume_counts_them(tmp_path: Path) -> None:
    write_prompts(tmp_path / "p.jsonl", [{"id": "a", "prompt": "one question"},
                                         {"id": "b", "prompt": "another"}])  # fmt: skip
    with serve(speed=0, seed=3, record_requests=True) as fake:
        summary = _gen(tmp_path, fake.base_url, samples=3, max_tokens=2000)
        assert summary.stop_reason == "done" and summary.rows_to_send == 6
        out = {r["id"]: r for r in records(tmp_path / "out.jsonl")}
        assert sorted(out) == ["a#0", "a#1", "a#2", "b#0", "b#1", "b#2"]
        answers = {(out[f"a#{k}"]["reasoning"], out[f"a#{k}"]["content"]) for k in range(3)}
        assert len(answers) == 3  # three answers of one prompt, none a cached replay
        sent = fake.fake.requests or []
        assert len({b["session_id"] for b in sent}) == 6
        assert fake.fake.response_cache.hits == 0 and len(fake.ledger) == 6
        again = _gen(tmp_path, fake.base_url, samples=3, max_tokens=2000)
        assert again.rows_already_done == 6 and again.rows_to_send == 0
        assert len(fake.ledger) == 6
        more = _gen(
            tmp_path, fake.base_url, samples=4, max_tokens=2000
        )  # a fourth sample of each: 2 more rows
        assert more.rows_already_done == 6 and more.rows_to_send == 2
        assert len(fake.ledger) == 8 and fake.fake.response_cache.hits == 0


def test_a_redo_at_the_same_limit_pays_for_new_answers_a_resend_is_free(tmp_path: Path) -> None:
    """Before: the redo sent the cut row's very request, and the cache replayed the cut answer at
    $0. Now the redo names the answer it redoes in its identity: a new answer, billed; the same
    redo sent again (a resume after a kill) is its cached answer, free."""
    write_prompts(tmp_path / "p.jsonl", [{"id": f"r{i}", "prompt": f"q {i}"} for i in range(6)])
    with serve(speed=0, seed=4, record_requests=True) as fake:
        first = _gen(tmp_path, fake.base_url, max_tokens=8)
        cut = [r for r in records(tmp_path / "out.jsonl") if r["status"] == "truncated"]
        assert first.truncated == len(cut) >= 3
        billed = len(fake.ledger)
        before = len(fake.fake.requests or [])
        redo = _gen(tmp_path, fake.base_url, max_tokens=8, redo_truncated=True)
        assert redo.rows_to_send == len(cut)
        assert fake.fake.response_cache.hits == 0 and redo.cache_hits == 0
        assert len(fake.ledger) == billed + len(cut)  # each redo a new, paid answer
        latest = {r["id"]: r for r in records(tmp_path / "out.jsonl")}
        assert all(latest[r["id"]]["generation_id"] != r["generation_id"] for r in cut)
        assert all("response_cache" not in latest[r["id"]] for r in cut)
        # the other half: the same attempt resent is answered from the cache, billed nothing
        redone = (fake.fake.requests or [])[before]
        again = _resend(fake.base_url, redone)
        assert again.headers["X-OpenRouter-Cache-Status"] == "HIT"
        assert again.json()["usage"]["cost"] == 0
        assert len(fake.ledger) == billed + len(cut)


def test_a_retry_after_a_bad_answer_is_new_and_after_a_lost_one_the_same(tmp_path: Path) -> None:
    write_prompts(tmp_path / "p.jsonl", [{"id": "r", "prompt": "q"}])
    with serve(speed=0, seed=1, record_requests=True, faults="choice_error=@1") as fake:
        summary = _gen(tmp_path, fake.base_url)
        sent = fake.fake.requests or []
    assert summary.ok + summary.truncated == 1 and len(sent) == 2
    bad, retry = sent
    job = cache_job(tmp_path / "out.jsonl")
    assert bad["session_id"] == row_session("r", job=job)
    assert retry["session_id"] == row_session("r", "retry-1", job)  # never the bad one's replay
    assert {k: v for k, v in bad.items() if k != "session_id"} == {
        k: v for k, v in retry.items() if k != "session_id"
    }
    for name in ("out.jsonl", "out.jsonl.ledger"):
        (tmp_path / name).unlink()
    write_prompts(tmp_path / "p.jsonl", [{"id": "s", "prompt": "q"}])
    with serve(speed=0, seed=1, record_requests=True, faults="drop=@1") as fake:
        summary = _gen(tmp_path, fake.base_url)
        sent = fake.fake.requests or []
    assert summary.ok + summary.truncated == 1 and len(sent) == 2
    job = cache_job(tmp_path / "out.jsonl")
    assert Counter(b["session_id"] for b in sent) == {row_session("s", job=job): 2}  # a resend


@pytest.mark.slow
def test_samples_killed_in_flight_come_back_free_with_their_draws(tmp_path: Path) -> None:
    """A child running two samples of each prompt under a thinking mix is killed with SIGKILL
    while its requests are in flight; the resume sends each lost sample's very request (the same
    draw, the same identity) and the fake answers it from its cache: nothing billed again."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests._gated_clock import GatedClock
    from tests._generate import ROOT, prompt_rows

    write_prompts(tmp_path / "p.jsonl", prompt_rows(3))
    options = {"prompts": str(tmp_path / "p.jsonl"), "policy": str(POLICY),
               "out": str(tmp_path / "out.jsonl"), "max_tokens": 60, "concurrency": 6,
               "budget_usd": "5", "api_key": KEY, "samples": 2,
               "thinking_mix": "on=0.5,off=0.5"}  # fmt: skip
    clock = GatedClock()  # every answer held at the fake until the child is dead
    with serve(speed=1, seed=5, record_requests=True, clock=clock) as fake:
        options["base_url"] = fake.base_url
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests._child", json.dumps(options)],
            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while len(fake.fake.requests or []) < 6 and time.monotonic() < deadline:
            time.sleep(0.005)  # every sample's request is at the fake
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        clock.release()
        out = tmp_path / "out.jsonl"
        before = {r["id"] for r in records(out)} if out.exists() else set()
        lost = 6 - len(before)
        assert lost >= 1, "every answer came before the kill: the fake's clock did not hold them"
        while fake.fake.response_cache.stores < 6 and time.monotonic() < deadline:
            time.sleep(0.01)  # the fake finishes (bills, caches) what was in flight
        billed = fake.ledger.total_usd
        first = {b["session_id"]: b for b in fake.fake.requests or []}
        summary = _gen(tmp_path, fake.base_url, max_tokens=60, samples=2,
                       thinking_mix="on=0.5,off=0.5", concurrency=6)  # fmt: skip
        resent = (fake.fake.requests or [])[6:]
    assert summary.stop_reason == "done" and summary.cache_hits == lost
    assert fake.ledger.total_usd == billed and len(fake.ledger) == 6  # the resends were free
    assert len(resent) == lost and all(first[b["session_id"]] == b for b in resent)
    again = [r for r in records(tmp_path / "out.jsonl") if r["id"] not in before]
    assert all(r["response_cache"] == "hit" and r["cost_usd"] == 0 for r in again)


def test_samples_go_to_their_prompts_shard_and_the_dry_run_counts_them_there(
    tmp_path: Path,
) -> None:
    from openrouter_probe.generation.prompts import shard_of
    from tests._generate import LedgerSender, prompt_rows

    write_prompts(tmp_path / "p.jsonl", prompt_rows(20))
    per_shard = Counter(shard_of(f"r{i}", 2) for i in range(20))
    for i in range(2):
        dry = asyncio.run(
            generate(tmp_path / "p.jsonl", policy=POLICY, out=tmp_path / f"o{i}.jsonl",
                     snapshot="bundled", send=LedgerSender(), dry_run=True, shard=(i, 2),
                     samples=3)
        )  # fmt: skip
        assert dry.rows_to_send == 3 * per_shard[i]
        assert [s["rows"] for s in dry.shard_shares] == [3 * per_shard[0], 3 * per_shard[1]]


def test_a_fresh_output_is_a_new_job_and_a_resume_keeps_its_own(tmp_path: Path) -> None:
    from openrouter_probe.generation.opening import _cache_job

    assert _cache_job([{"run": "a", "cache_job": "5eed"}, {"run": "b"}]) == "5eed"
    assert _cache_job([{"run": "a"}]) == ""  # an output of before: its rows' bytes as they were
    assert len(_cache_job([])) == 16 and _cache_job([]) != _cache_job([])
    write_prompts(tmp_path / "p.jsonl", [{"id": f"r{i}", "prompt": f"q {i}"} for i in range(4)])
    with serve(speed=0, seed=2) as fake:
        first = _gen(tmp_path, fake.base_url)
        job = cache_job(tmp_path / "out.jsonl")
        (tmp_path / "out.jsonl").rename(tmp_path / "first.jsonl")
        (tmp_path / "out.jsonl.ledger").rename(tmp_path / "first.jsonl.ledger")
        second = _gen(tmp_path, fake.base_url)  # the same prompts into a fresh output
        assert first.cache_hits == second.cache_hits == 0
        assert len(fake.ledger) == 8  # new answers, each paid: never the first job's replayed
        second_job = cache_job(tmp_path / "out.jsonl")
        assert second_job != job
        rows = [{"id": f"r{i}", "prompt": f"q {i}"} for i in range(5)]
        write_prompts(tmp_path / "p.jsonl", rows)
        again = _gen(tmp_path, fake.base_url)  # a resume: a new run of the same job
        assert again.rows_to_send == 1
    journal = (tmp_path / "out.jsonl.ledger").read_text(encoding="utf-8").splitlines()
    jobs = [json.loads(x)["cache_job"] for x in journal if '"cache_job"' in x]
    assert jobs == [second_job, second_job]  # each run's header: the job the first one drew
