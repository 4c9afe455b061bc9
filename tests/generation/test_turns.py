"""``generate --turns all``: every assistant turn regenerated, in order.

On the fake server (speed 0, the waits injected away) and with the in-process ``LedgerSender``:
the bodies each turn sent (the regenerated history, no earlier reasoning), the record (``turns``,
the row's totals), the turns file and the resume (a kill mid-row, a budget stop mid-row: only the
missing turns are sent, none is billed twice), the dry run's turn count, the failure and truncation
rules, and the export that SpecForge's tools read.
"""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from openrouter_probe.api.connection import Connection
from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.audit import audit
from openrouter_probe.policy.compiled import load_compiled_policy
from openrouter_probe.rules.routing import route
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.run.books.output import load_resume_state
from openrouter_probe.run.books.turns import TurnBook, plan_turns, row_totals
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.report import render_result
from openrouter_probe.run.send.transport import Answer, HttpTransport
from tests._generate import (
    POLICY,
    LedgerSender,
    http_failure,
    journal_reconciled,
    no_sleep,
    records,
    write_prompts,
)
from tests._specforge import assert_specforge_row, expand_events
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples" / "prompts.jsonl"
MULTI = {"b6-0001", "b6-0003"}  # the examples' rows with a prompt-file assistant turn


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def _turns_file(out: Path) -> list[dict[str, Any]]:
    path = Path(f"{out}.turns")
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _first_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


# -- which turns a row has -------------------------------------------------------------------------


def test_the_turns_of_a_row_are_its_assistant_messages_and_the_answer_after() -> None:
    sys_ = {"role": "system", "content": "be brief"}
    assert plan_turns([_user("q")]) == ()  # no assistant turn: one request, as with `last`
    assert plan_turns([sys_, _user("q"), _assistant("a"), _user("q2")]) == (2, 4)
    assert plan_turns([_user("q"), _assistant("a"), _user("q2"), _assistant("b")]) == (1, 3)
    # an assistant message before any user message is not a turn: it has nothing to answer
    assert plan_turns([_assistant("hello"), _user("q")]) == ()
    assert plan_turns([_assistant("hello"), _user("q"), _assistant("a"), _user("r")]) == (2, 4)
    tool = [
        _user("q"),
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        _user("and?"),
    ]
    assert plan_turns(tool) == ()  # a prompt-file tool result answers the prompt file's call


def test_the_rows_totals_are_the_sums_of_its_turns_and_the_last_turns_answer() -> None:
    usage1 = {"prompt_tokens": 10, "completion_tokens": 100, "cost": 0.0001,
              "completion_tokens_details": {"reasoning_tokens": 80}}  # fmt: skip
    usage2 = {"prompt_tokens": 150, "completion_tokens": 60, "cost": 0.0002,
              "completion_tokens_details": {"reasoning_tokens": 20}}  # fmt: skip
    turns = [
        {"index": 1, "content": "a1", "reasoning": "r1", "usage": usage1, "cost_usd": 0.0001,
         "provider": "Chutes", "model": "m1", "generation_id": "g1", "attempts": 2,
         "finish_reason": "stop", "tool_calls": None},
        {"index": 3, "content": "a2", "reasoning": "r2", "usage": usage2, "cost_usd": 0.0002,
         "provider": "Parasail", "model": "m2", "generation_id": "g2", "attempts": 1,
         "finish_reason": "stop", "tool_calls": None, "failed_attempts_cost_usd": 0.00001},
    ]  # fmt: skip
    fields = row_totals(turns)
    assert fields["provider"] == "Parasail" and fields["model"] == "m2"
    assert (fields["content"], fields["reasoning"], fields["generation_id"]) == ("a2", "r2", "g2")
    assert fields["usage"] == {
        "prompt_tokens": 160,
        "completion_tokens": 160,
        "cost": 0.0003,
        "completion_tokens_details": {"reasoning_tokens": 100},
    }
    assert fields["cost_usd"] == 0.0003 and fields["attempts"] == 3
    assert fields["failed_attempts_cost_usd"] == 0.00001
    assert fields["turns"] == turns
    # a turn whose cost is unknown: the row's cost is unknown, its worst case possibly billed
    turns[0] = {**turns[0], "cost_usd": None, "possibly_billed_usd": 0.004}
    fields = row_totals(turns)
    assert fields["cost_usd"] is None and fields["possibly_billed_usd"] == 0.004


def test_a_row_resumes_from_the_kept_turns_that_follow_its_plan(tmp_path: Path) -> None:
    from openrouter_probe.run.rows import PromptRow

    messages = [_user("q1"), _assistant("a1"), _user("q2"), _assistant("a2"), _user("q3")]
    row = PromptRow("r", "d", messages, {}, 1, 10)

    def start(*indices: int) -> tuple[list[int], list[str]]:
        kept = {"r": [{"index": i, "content": f"m{i}"} for i in indices]}
        book = TurnBook.start(tmp_path / "out.jsonl", [row], kept)
        return [t["index"] for t in book.rows["r"].done], book.dropped

    assert start() == ([], [])
    assert start(1) == ([1], [])
    assert start(1, 3) == ([1, 3], [])
    # a turn at the first index starts afresh (a run that began the row again)
    assert start(1, 1, 3) == ([1, 3], [])
    # turns that do not follow the plan (the prompts changed under the id) are not used
    assert start(2) == ([], ["r"])
    assert start(2, 1) == ([1], [])  # ... and a later fresh start is
    assert start(1, 3, 5) == ([], ["r"])  # the last turn is never kept: it does not fit
    request = TurnBook.start(tmp_path / "out.jsonl", [row], {"r": [{"index": 1,
        "content": "m1"}, {"index": 3, "content": "m3"}]}).requests([row])[0]  # fmt: skip
    assert request.messages == [_user("q1"), _assistant("m1"), _user("q2"), _assistant("m3"),
                                _user("q3")]  # fmt: skip


# -- on the fake: the examples, end to end ---------------------------------------------------------


def _run(out: Path, fake: Any, **options: Any) -> Any:
    args: dict[str, Any] = {
        "policy": POLICY,
        "out": out,
        "base_url": fake.base_url,
        "api_key": "sk-fake",
        "sleep": no_sleep,
        "max_tokens": 4096,
        "budget_usd": 1,
        "reasoning_effort": "high",
        "turns": "all",
    }
    args.update(options)
    prompts = args.pop("prompts", EXAMPLES)
    return asyncio.run(generate(prompts, **args))


def test_the_examples_turn_by_turn_export_as_specforge_reads_them(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with serve(speed=0, seed=3, record_requests=True) as fake:
        summary = _run(out, fake)
        bodies = list(fake.fake.requests)
        ledger = {e.generation_id: e for e in fake.ledger.entries}
    assert summary.stop_reason == "done" and summary.ok == 18 and summary.truncated == 0
    assert summary.turns_to_send == 20 and summary.turns_done == 20 and summary.requests == 20
    assert len(bodies) == 20 and len(ledger) == 20
    by_id = {r["id"]: r for r in records(out)}
    assert len(by_id) == 18 and all(r["status"] == "ok" for r in by_id.values())
    prompts = {json.loads(x)["id"]: json.loads(x) for x in EXAMPLES.read_text().splitlines()}
    for ident in MULTI:
        record, messages = by_id[ident], prompts[ident]["messages"]
        assert [t["index"] for t in record["turns"]] == [1, 3]
        assert record["messages"] == messages  # the prompt, as the prompts file holds it
        first, second = record["turns"]
        sent = [b for b in bodies if _first_user(b) == messages[0]["content"]]
        assert [b["messages"] for b in sent] == [
            messages[:1],  # the first turn: the history before the prompt-file answer
            # the second carries the model's own first turn (its content, not its reasoning)
            [messages[0], {"role": "assistant", "content": first["content"]}, messages[2]],
        ]
        assert all(b["reasoning"] == {"effort": "high"} for b in sent)
        for turn in record["turns"]:
            billed = ledger[turn["generation_id"]]  # every turn billed once, at its cost
            assert Decimal(str(turn["cost_usd"])) == billed.cost_usd
            assert turn["usage"]["completion_tokens"] == billed.completion_tokens
            assert turn["provider"] == billed.provider and turn["attempts"] == 1
            assert turn["content"] and turn["reasoning"]
        # the row's totals: the last turn's answer, the turns' money and tokens summed
        assert (record["content"], record["reasoning"]) == (second["content"], second["reasoning"])
        assert record["generation_id"] == second["generation_id"]
        assert Decimal(str(record["cost_usd"])) == sum(
            (ledger[t["generation_id"]].cost_usd for t in record["turns"]), Decimal(0)
        )
        assert record["usage"]["completion_tokens"] == sum(
            t["usage"]["completion_tokens"] for t in record["turns"]
        )
    # a row without a prompt-file assistant turn is one request, recorded as with `last`
    assert all("turns" not in r for i, r in by_id.items() if i not in MULTI)
    # the turns file kept each first turn while its row was unfinished
    kept = _turns_file(out)
    assert sorted((k["id"], k["turn"]["index"]) for k in kept) == [
        ("b6-0001", 1), ("b6-0003", 1)]  # fmt: skip
    assert {k["turn"]["generation_id"] for k in kept} == {
        by_id[i]["turns"][0]["generation_id"] for i in MULTI
    }
    target = tmp_path / "train.jsonl"
    result = CliRunner().invoke(
        cli, ["export", str(out), "--format", "specforge", "--require-reasoning", "-o",
              str(target)]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "wrote 18 of 18 rows" in result.stderr
    rows = [json.loads(x) for x in target.read_text().splitlines()]
    assistants = [m for r in rows for m in r["conversations"] if m["role"] == "assistant"]
    assert len(rows) == 18 and len(assistants) == 20
    assert sum(len(expand_events(r)) for r in rows) == 20
    for row in rows:
        assert assert_specforge_row(row, expect_reasoning=True, strict_think_markers=True)
        assert row["status"] == "success" and row["preserve_thinking"] is True
        for message in row["conversations"]:
            if message["role"] == "assistant":
                assert message["generated"] is True
                assert message["content"].strip() and message["reasoning_content"].strip()
    multi = {r["id"]: r for r in rows if r["id"] in MULTI}
    for ident, row in multi.items():
        turns = by_id[ident]["turns"]
        assert [m["content"] for m in row["conversations"] if m["role"] == "assistant"] == [
            t["content"] for t in turns
        ]


def test_the_default_is_last_the_prompt_sent_whole(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with serve(speed=0, seed=3, record_requests=True) as fake:
        summary = _run(out, fake, turns="last")
        bodies = list(fake.fake.requests)
    assert summary.requests == 18 and summary.turns_to_send is None
    prompts = [json.loads(x)["messages"] for x in EXAMPLES.read_text().splitlines()]
    assert sorted(json.dumps(b["messages"]) for b in bodies) == sorted(
        json.dumps(m) for m in prompts
    )
    assert all("turns" not in r for r in records(out))
    assert not Path(f"{out}.turns").exists()
    assert "turns" not in json.loads(Path(f"{out}.ledger").read_text().splitlines()[0])


def test_turns_must_be_last_or_all(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="turns='every': use 'last'"):
        asyncio.run(
            generate(EXAMPLES, policy=POLICY, out=tmp_path / "o.jsonl", turns="every",
                     dry_run=True)
        )  # fmt: skip


def test_the_dry_run_counts_turns_not_rows(tmp_path: Path) -> None:
    last = asyncio.run(
        generate(EXAMPLES, policy=POLICY, out=tmp_path / "a.jsonl", dry_run=True,
                 snapshot="bundled", max_tokens=1000)
    )  # fmt: skip
    every = asyncio.run(
        generate(EXAMPLES, policy=POLICY, out=tmp_path / "b.jsonl", dry_run=True,
                 snapshot="bundled", max_tokens=1000, turns="all")
    )  # fmt: skip
    assert last.rows_to_send == every.rows_to_send == 18
    assert every.turns_to_send == 20 and last.turns_to_send is None
    assert "turns (turns='all'): 20 to send for the rows to send" in render_result(every)
    # two more requests, and each second turn's prompt holds the first answer at its max_tokens
    assert last.worst_case_usd is not None and every.worst_case_usd is not None
    extra = every.worst_case_usd - last.worst_case_usd
    one_answer = Decimal(1000) * Decimal("0.0000022")  # at least: 1000 prompt tokens, cheapest
    assert extra > 2 * one_answer
    assert not (tmp_path / "b.jsonl").exists() and not (tmp_path / "b.jsonl.turns").exists()


# -- resume: a kill mid-row, a budget stop mid-row -------------------------------------------------


class _Killed(Exception):
    """Stands for the process dying: raised after the answer arrived, before it is recorded."""


def test_a_kill_mid_row_resumes_at_the_first_missing_turn_and_bills_none_twice(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    with serve(speed=0, seed=5, record_requests=True) as fake:

        async def first_run() -> None:
            connection = Connection(api_key="sk-fake", base_url=fake.base_url)
            async with HttpTransport(connection, limit=4, read_timeout_s=30) as transport:

                async def send(body: bytes, **kwargs: Any) -> Any:
                    outcome = await transport.send(body, **kwargs)
                    request = json.loads(body)
                    if len(request["messages"]) == 3 and "cook" in _first_user(request):
                        raise _Killed  # b6-0001's second turn: billed, never recorded
                    return outcome

                await generate(EXAMPLES, policy=POLICY, out=out, api_key="sk-fake",
                               base_url=fake.base_url, sleep=no_sleep, send=send,
                               max_tokens=4096, budget_usd=1, reasoning_effort="high",
                               turns="all", concurrency=4)  # fmt: skip

        with pytest.raises(_Killed):
            asyncio.run(first_run())
        assert "b6-0001" not in {r["id"] for r in records(out)}  # no line for the unfinished row
        (kept,) = [k for k in _turns_file(out) if k["id"] == "b6-0001"]
        assert kept["turn"]["index"] == 1
        sent_before, billed_before = len(fake.fake.requests), len(fake.ledger)
        assert sent_before == billed_before == 20
        summary = _run(out, fake)
        resumed = fake.fake.requests[sent_before:]
        entries = fake.ledger.entries
    # the resume sent one request: b6-0001's second turn, carrying the kept first one
    assert summary.requests == 1 and summary.rows_to_send == 1 and summary.turns_resumed == 1
    assert summary.turns_to_send == 1 and summary.ok == 1
    (body,) = resumed
    prompt = json.loads(EXAMPLES.read_text().splitlines()[9])["messages"]
    assert body["messages"] == [
        prompt[0], {"role": "assistant", "content": kept["turn"]["content"]}, prompt[2]]  # fmt: skip
    (row,) = [r for r in records(out) if r["id"] == "b6-0001"]
    assert row["turns"][0] == kept["turn"]  # the kept turn, not bought again
    assert row["turns"][0]["run_id"] != row["run_id"]  # bought by the killed run
    # billed: 20 generations before the kill (one of them lost with the kill), 1 after
    assert len(entries) == 21
    recorded = [t["generation_id"] for r in records(out) for t in r.get("turns", [r])]
    assert len(recorded) == len(set(recorded)) == 20
    (lost,) = [e for e in entries if e.generation_id not in recorded]
    # the lost answer was in flight at the "kill": the resume counted it and settled it from
    # /generation at exactly what the fake billed
    assert summary.killed_in_flight_before == 1 and summary.reconciled_before == 1
    assert journal_reconciled(Path(f"{out}.ledger")) == {lost.generation_id: lost.cost_usd}
    billed = sum((e.cost_usd for e in entries), Decimal(0))
    assert summary.spent_total_usd == billed


def _three_turns(path: Path) -> Path:
    messages = [
        _user("question r0 one"),
        _assistant("first prompt-file answer"),
        _user("question r0 two"),
        _assistant("second prompt-file answer"),
        _user("question r0 three"),
    ]
    return write_prompts(path, [{"id": "r0", "messages": messages}])


def test_a_budget_stop_mid_row_writes_no_line_and_the_resume_buys_only_the_rest(
    tmp_path: Path,
) -> None:
    prompts = _three_turns(tmp_path / "prompts.jsonl")
    out = tmp_path / "out.jsonl"
    # the cap of the first run is exactly the first turn's worst case: the first turn is sent,
    # the second (a longer prompt) cannot fit beside what the first cost
    first_alone = write_prompts(
        tmp_path / "first.jsonl", [{"id": "r0", "messages": [_user("question r0 one")]}]
    )
    dry = asyncio.run(
        generate(first_alone, policy=POLICY, out=tmp_path / "dry.jsonl", dry_run=True,
                 max_tokens=4096, snapshot="bundled", reasoning_effort="high")
    )  # fmt: skip
    assert dry.worst_case_usd is not None
    with serve(speed=0, seed=7, record_requests=True) as fake:
        first = _run(out, fake, prompts=prompts, max_tokens=4096, budget_usd=dry.worst_case_usd,
                     snapshot="bundled")  # fmt: skip
        assert first.stop_reason == "budget" and first.requests == 1
        assert first.rows_partial == 1 and first.ok == 0 and first.turns_done == 1
        assert "1 row(s) stopped mid-way" in render_result(first)
        assert fake.ledger.total_usd <= dry.worst_case_usd  # the cap held across the turns
        assert records(out) == []  # no output line for a row not finished
        kept = _turns_file(out)
        assert [(k["id"], k["turn"]["index"]) for k in kept] == [("r0", 1)]
        # were the journal lost, the kept turn's money would be unknown (issue 22 item 5): its
        # record is no money, only a floor and the generation id /generation settles it from
        alone = load_resume_state(out, journal_runs=set(), repair=False)
        (unknown,) = alone.unjournaled
        assert unknown.generation_id == kept[0]["turn"]["generation_id"]
        assert unknown.recorded_usd == Decimal(str(kept[0]["turn"]["cost_usd"])) > 0
        assert list(alone.turns) == ["r0"]
        # the resume's dry run counts the two turns still to send
        again = _run(out, fake, prompts=prompts, max_tokens=4096, dry_run=True)
        assert again.turns_to_send == 2 and again.turns_resumed == 1
        second = _run(out, fake, prompts=prompts, max_tokens=4096)
        bodies = fake.fake.requests
        entries = fake.ledger.entries
    assert second.stop_reason == "done" and second.requests == 2 and second.ok == 1
    (row,) = records(out)
    # the kept turn's tokens count too (billed by the first run): the row's whole output
    billed = sum(t["usage"]["completion_tokens"] for t in row["turns"])
    assert second.datasets["default"].output_tokens == billed == row["usage"]["completion_tokens"]
    assert [t["index"] for t in row["turns"]] == [1, 3, 5]
    assert row["turns"][0] == kept[0]["turn"]
    assert [t["generation_id"] for t in row["turns"]] == [e.generation_id for e in entries]
    one, two, three = (t["content"] for t in row["turns"])
    assert row["content"] == three
    assert [len(b["messages"]) for b in bodies] == [1, 3, 5]
    assert bodies[2]["messages"][1] == {"role": "assistant", "content": one}
    assert bodies[2]["messages"][3] == {"role": "assistant", "content": two}
    assert bodies[2]["messages"][4] == _user("question r0 three")
    assert second.spent_total_usd == fake.ledger.total_usd


# -- turns that fail, are cut, cost what is unknown (in process) -----------------------------------


def _three_turn_rows(path: Path, n: int) -> Path:
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"r{i}",
                "dataset": f"d{i % 2}",
                "messages": [
                    _user(f"question r{i} one"),
                    _assistant("copied"),
                    _user(f"question r{i} two"),
                    _assistant("copied again"),
                    _user(f"question r{i} three"),
                ],
            }
        )
    return write_prompts(path, rows)


def _journal(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(f"{out}.ledger").read_text().splitlines()]


def _in_process(prompts: Path, out: Path, sender: LedgerSender, **options: Any) -> Any:
    args: dict[str, Any] = {
        "policy": POLICY,
        "out": out,
        "api_key": "sk-test",
        "send": sender,
        "sleep": no_sleep,
        "snapshot": "bundled",
        "max_tokens": 200,
        "turns": "all",
        "concurrency": 8,
    }
    args.update(options)
    return asyncio.run(generate(prompts, **args))


def test_a_turn_that_fails_fails_the_row_with_the_turns_so_far(tmp_path: Path) -> None:
    prompts = _three_turn_rows(tmp_path / "prompts.jsonl", 4)
    out = tmp_path / "out.jsonl"

    def fail(request: dict[str, Any], attempt: int) -> Any:
        if len(request["messages"]) == 3 and request["messages"][-1]["content"].startswith(
            "question r1 "
        ):
            return http_failure(400, "This endpoint's maximum context length is 10 tokens")
        return None

    sender = LedgerSender(seed=1, fail=fail)
    summary = _in_process(prompts, out, sender, max_tokens=100000)
    assert summary.failed == 1 and summary.ok == 3
    by_id = {r["id"]: r for r in records(out)}
    failed = by_id["r1"]
    assert failed["status"] == "failed" and failed["error"]["status"] == 400
    assert [t["index"] for t in failed["turns"]] == [1]  # the turn it finished is recorded
    assert failed["turns"][0]["generation_id"] in {g for _, g, _ in sender.ledger}
    # --redo-failed starts the row at the turn that failed: the first is not bought again
    sender.fail = None
    before = len(sender.ledger)
    again = _in_process(prompts, out, sender, redo_failed=True, max_tokens=100000)
    assert again.requests == 2 and again.ok == 1 and len(sender.ledger) == before + 2
    (redone,) = [r for r in records(out) if r["id"] == "r1" and r["status"] == "ok"]
    assert redone["turns"][0] == failed["turns"][0]


def test_a_turn_cut_at_max_tokens_stops_the_row_as_truncated(tmp_path: Path) -> None:
    prompts = _three_turn_rows(tmp_path / "prompts.jsonl", 1)
    out = tmp_path / "out.jsonl"
    sender = LedgerSender(seed=1)
    # the in-process sender cuts an answer when it draws max_tokens: with 1 it always does
    summary = _in_process(prompts, out, sender, max_tokens=1)
    assert summary.truncated == 1 and summary.requests == 1 and summary.turns_done == 1
    (row,) = records(out)
    assert row["status"] == "truncated" and [t["index"] for t in row["turns"]] == [1]
    assert row["finish_reason"] == "length"
    assert _turns_file(out) == []  # a finished row's turns are in its line
    # its conversation ends with the cut turn: what followed answered text the model never wrote
    from openrouter_probe.generation.conversation import conversation_of

    conv = conversation_of(row)
    assert [m["role"] for m in conv.messages] == ["user", "assistant"]


def test_a_turn_without_a_cost_counts_at_its_worst_case(tmp_path: Path) -> None:
    prompts = _three_turn_rows(tmp_path / "prompts.jsonl", 1)
    out = tmp_path / "out.jsonl"

    class NoCost(LedgerSender):
        async def __call__(self, body: bytes, **kwargs: Any) -> Any:
            answer = await super().__call__(body, **kwargs)
            if isinstance(answer, Answer) and len(json.loads(body)["messages"]) == 1:
                answer.usage = {k: v for k, v in (answer.usage or {}).items() if k != "cost"}
            return answer

    sender = NoCost(seed=2)
    summary = _in_process(prompts, out, sender, max_tokens=100000)
    (row,) = records(out)
    first = row["turns"][0]
    assert first["cost_usd"] is None and first["possibly_billed_usd"] > 0
    assert row["cost_usd"] is None and row["possibly_billed_usd"] == first["possibly_billed_usd"]
    assert summary.possibly_billed_usd == Decimal(str(first["possibly_billed_usd"]))
    assert summary.spent_usd >= sender.billed_usd  # unknown is not zero


def test_many_rows_share_the_cap_across_their_turns(tmp_path: Path) -> None:
    prompts = _three_turn_rows(tmp_path / "prompts.jsonl", 60)
    out = tmp_path / "out.jsonl"
    sender = LedgerSender(seed=4)
    summary = _in_process(prompts, out, sender, budget_usd="0.05", max_tokens=2000)
    assert summary.stop_reason == "budget"
    assert sender.billed_usd <= Decimal("0.05")  # the cap held, every turn reserved
    assert summary.spent_usd == sender.billed_usd
    lines = records(out)
    assert all(len(r["turns"]) == 3 for r in lines if r["status"] == "ok")
    kept = _turns_file(out)
    finished = {r["id"] for r in lines}
    partial = {k["id"] for k in kept} - finished
    assert summary.rows_partial == len(partial)
    # every billed answer is a finished row's turn or a kept turn: none lost, none twice
    gens = [t["generation_id"] for r in lines for t in r["turns"]]
    gens += [k["turn"]["generation_id"] for k in kept if k["id"] not in finished]
    assert sorted(gens) == sorted(g for _, g, _ in sender.ledger)
    # both datasets got rows (the cap is shared round-robin between them)
    assert {r["dataset"] for r in lines if r["status"] == "ok"} == {"d0", "d1"}
    # the next start counts the kept turns' money (in the journal) and resumes them
    state = load_resume_state(out, journal_runs={lines[0]["run_id"]}, repair=False)
    assert set(state.turns) == partial


def test_audit_counts_each_turn_at_its_provider(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with serve(speed=0, seed=3) as fake:
        _run(out, fake)
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    assert report.rows == 18 and report.exit_code == 0
    assert sum(p.turns for p in report.providers) == 4
    assert sum(p.answers for p in report.providers) == 20
    lines = records(out)
    cost = sum(
        (Decimal(str(t["cost_usd"])) for r in lines for t in r.get("turns", [r])), Decimal(0)
    )
    assert report.realised_usd == cost
    tokens = sum(t["usage"]["completion_tokens"] for r in lines for t in r.get("turns", [r]))
    assert sum(p.completion_tokens for p in report.providers) == tokens


def test_the_turns_file_is_read_tolerantly_and_a_damaged_line_is_named(tmp_path: Path) -> None:
    prompts = _three_turn_rows(tmp_path / "prompts.jsonl", 2)
    out = tmp_path / "out.jsonl"
    sender = LedgerSender(seed=3)
    first = _in_process(prompts, out, sender, budget_usd="0.0007", max_tokens=100)
    assert first.rows_partial >= 1  # stopped mid-way, turns kept
    turns_file = Path(f"{out}.turns")
    whole = turns_file.read_text()
    kept = len(whole.splitlines())
    # a torn last line (a kill mid-write) is cut on start; that turn is bought again
    turns_file.write_text(whole + '{"id": "r1", "dataset": "d1", "turn": {"ind')
    again = _in_process(prompts, out, sender, max_tokens=100000)
    assert again.stop_reason == "done" and again.turns_resumed == kept
    assert all(line.endswith("}") for line in turns_file.read_text().splitlines())
    # a damaged line in the middle stops the next start, naming the file and the line
    lines = turns_file.read_text().splitlines()
    turns_file.write_text("\n".join([lines[0], "not json", *lines[1:]]) + "\n")
    with pytest.raises(
        ConfigError, match=r"out\.jsonl\.turns:2: .*Restore it, or remove that line"
    ):
        _in_process(prompts, out, sender)
    turns_file.write_text('{"id": "r0", "turn": {"content": "x"}}\n')
    with pytest.raises(
        ConfigError, match=r"out\.jsonl\.turns:1: not a turn of `generate` answering every turn"
    ):
        _in_process(prompts, out, sender)


def test_kept_turns_are_used_without_the_output_and_never_dropped_by_turns_last(
    tmp_path: Path,
) -> None:
    """Review of 0.2.0: with the output (and its journal) gone, the kept turns were ignored,
    bought again and not counted; a resume without --turns all threw them away silently."""
    prompts = _three_turn_rows(tmp_path / "prompts.jsonl", 2)
    out = tmp_path / "out.jsonl"
    sender = LedgerSender(seed=3)
    first = _in_process(prompts, out, sender, budget_usd="0.0007", max_tokens=100)
    assert first.rows_partial >= 1 and records(out) == []
    kept = _turns_file(out)
    paid = sum(Decimal(str(k["turn"]["cost_usd"])) for k in kept)
    # --turns last on an output whose rows have kept turns: refused, nothing sent or changed
    before = Path(f"{out}.turns").read_bytes()
    sent = len(sender.bodies)
    with pytest.raises(ConfigError, match=r"out\.jsonl\.turns keeps turns of \d+ unfinished row"):
        _in_process(prompts, out, sender, turns="last")
    assert len(sender.bodies) == sent and Path(f"{out}.turns").read_bytes() == before
    # the output and the journal gone: the kept turns are used, not bought again, and their
    # money is unknown (issue 22 item 5): at its worst case, never less than what they state
    out.unlink(missing_ok=True)
    Path(f"{out}.ledger").unlink()
    state = load_resume_state(out, repair=False)
    assert sum(len(t) for t in state.turns.values()) == len(kept) == len(state.unjournaled)
    assert sum(u.recorded_usd for u in state.unjournaled) == paid > 0
    prices = Prices.worst_case(
        route(load_compiled_policy(POLICY).provider, bundled_snapshot().endpoints).admitted
    )
    worst = sum(u.worst_usd(prices, 200) for u in state.unjournaled)
    assert worst > paid  # each turn's own tokens at the dearest admitted prices
    dry = _in_process(prompts, out, sender, dry_run=True)
    assert dry.turns_resumed == len(kept) and dry.spent_before_usd == worst
    assert not Path(f"{out}.ledger").exists()  # a dry run writes no journal
    done = _in_process(prompts, out, sender, max_tokens=100000)
    assert done.stop_reason == "done" and done.turns_resumed == len(kept)
    # the run adopted them into the journal, once: no /generation here, so at their worst case
    assert done.spent_before_usd == worst and done.unsettleable == 0
    adopted = [x for x in _journal(out) if "adopts" in x]
    assert len(adopted) == len(kept) and all(x["gen_id"] for x in adopted)
    again = _in_process(prompts, out, sender, dry_run=True)
    assert again.spent_before_usd == done.spent_total_usd
    assert len([x for x in _journal(out) if "adopts" in x]) == len(kept)
    ids = [(k["id"], k["turn"]["index"]) for k in _turns_file(out)]
    assert len(ids) == len(set(ids))  # no turn written twice: the kept ones were not re-bought
    assert {(k["id"], k["turn"]["index"]) for k in kept} <= set(ids)
