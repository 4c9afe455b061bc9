"""A pilot (``generate(pilot=N)``): the first N rows of each dataset, sent as the full run sends
them, into the full run's output; then a report per dataset of what their answers teach (lengths,
the ``max_tokens`` that keeps 95% and 99% whole, what a request at it holds in flight, useful rows
per dollar); the same command without ``pilot`` resumes and pays for no row twice."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.errors import Message, OptionError
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.pilot import percentile
from openrouter_probe.run.report import render_result
from openrouter_probe.run.send.request import row_session
from openrouter_probe.run.stop import StopReason
from tests._generate import POLICY, cache_job, no_sleep, prompt_rows, records, write_prompts

ROWS, PILOT, MAX_TOKENS = 60, 20, 4096


def _gen(tmp: Path, base_url: str, out: str = "out.jsonl", **options: Any) -> Any:
    options = {"max_tokens": MAX_TOKENS, "concurrency": 1, "budget_usd": 5, **options}
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / out,
            base_url=base_url,
            sleep=no_sleep,
            **options,
        )
    )


def _row(body: dict[str, Any]) -> str:
    return "r" + str(body["messages"][-1]["content"].split(" ")[1])


def _notes(summary: Any, code: str) -> list[Message]:
    return [n for n in summary.notes if isinstance(n, Message) and n.code == code]


def _nearest_rank(values: list[int], share: float) -> int:
    """The least value with at least ``share`` of ``values`` at or under it."""
    ordered = sorted(values)
    return next(v for i, v in enumerate(ordered) if i + 1 >= share * len(ordered))


def test_the_percentile_is_the_nearest_rank() -> None:
    assert [percentile(range(1, 101), p) for p in (50, 90, 95, 100)] == [50, 90, 95, 100]
    assert percentile([7, 3, 5], 50) == 5 and percentile([4], 95) == 4
    assert percentile([], 50) is None


def test_a_pilot_sends_the_first_rows_of_each_dataset_as_the_full_run_and_reports(
    tmp_path: Path,
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(ROWS, datasets=2))
    with serve(speed=0, seed=7, median_tokens=120, record_requests=True) as fake:
        pilot = _gen(tmp_path, fake.base_url, pilot=PILOT, response_cache=False)
        sent = list(fake.fake.requests or [])
        ledger = {e.generation_id: e for e in fake.ledger.entries}
    with serve(speed=0, seed=7, median_tokens=120, record_requests=True) as full:
        _gen(tmp_path, full.base_url, out="full.jsonl", response_cache=False)
        full_bodies = {_row(b): b for b in full.fake.requests or []}
    # exactly the first PILOT rows of each dataset, each once, at the full run's request body
    by_dataset = {
        d: [f"r{i}" for i in range(ROWS) if f"d{i % 2}" == d][:PILOT] for d in ("d0", "d1")
    }
    assert sorted(_row(b) for b in sent) == sorted(by_dataset["d0"] + by_dataset["d1"])
    assert all(body == full_bodies[_row(body)] for body in sent)
    assert pilot.stop_reason == StopReason.PILOT and pilot.exit_code == 0
    assert (pilot.rows_to_send, pilot.ok + pilot.truncated, pilot.not_sent) == (40, 40, 0)
    # the lengths per dataset: the fake's own token counts of each row's billed answer
    out = {r["id"]: r for r in records(tmp_path / "out.jsonl")}
    lengths = {d: [ledger[out[i]["generation_id"]] for i in ids] for d, ids in by_dataset.items()}
    said = {n.values["dataset"]: n for n in _notes(pilot, "pilot-lengths")}
    keeps = {(n.values["dataset"], n.values["share"]): n for n in _notes(pilot, "pilot-keeps")}
    for dataset, entries in lengths.items():
        output = [e.completion_tokens for e in entries]
        reasoning = [e.reasoning_tokens for e in entries]
        assert max(output) < MAX_TOKENS  # none cut: every length is known
        note = said[dataset]
        assert (note.values["answers"], note.values["cut"]) == (PILOT, 0)
        wanted = (
            ", ".join(f"p{p} {_nearest_rank(output, p / 100):,d}" for p in (50, 90, 95))
            + f", max {max(output):,d}"
        )
        assert note.values["output"] == wanted
        assert note.values["reasoning"].endswith(
            f"p95 {_nearest_rank(reasoning, 0.95):,d}, max {max(reasoning):,d}"
        )
        k95, k99 = (keeps[dataset, s].values["max_tokens"] for s in (0.95, 0.99))
        assert (k95, k99) == (_nearest_rank(output, 0.95), _nearest_rank(output, 0.99))
        h95 = keeps[dataset, 0.95].values["hold"]
        assert keeps[dataset, 0.95].values["total"] == h95 * 1  # concurrency 1
        # useful rows per dollar: every answer whole, at the mean billed cost, over its 30 rows
        (useful,) = [n for n in _notes(pilot, "pilot-useful") if n.values["dataset"] == dataset]
        cost = sum(Decimal(str(out[i]["cost_usd"])) for i in by_dataset[dataset]) / PILOT
        assert useful.values["cost"] == cost and useful.values["rows"] == ROWS // 2
        assert useful.values["useful"] == useful.values["per"] == 1 / cost
        assert useful.values["projected"] == cost * (ROWS // 2)
    # the same figures by name in the summary's JSON
    figures = {f["dataset"]: f for f in json.loads(json.dumps(pilot.to_dict()))["pilot"]}
    d0 = [e.completion_tokens for e in lengths["d0"]]
    assert figures["d0"]["output_tokens"] == {
        "p50": _nearest_rank(d0, 0.5),
        "p90": _nearest_rank(d0, 0.9),
        "p95": _nearest_rank(d0, 0.95),
        "max": max(d0),
    }
    assert figures["d0"]["max_tokens_keeps"] == {
        "95%": _nearest_rank(d0, 0.95),
        "99%": _nearest_rank(d0, 0.99),
    }
    assert (figures["d1"]["answers"], figures["d1"]["cut"], figures["d1"]["rows"]) == (20, 0, 30)
    # what a request at that max_tokens holds in flight is what a run at it holds, one at a time
    k95, h95 = (keeps["d0", 0.95].values[k] for k in ("max_tokens", "hold"))
    with serve(speed=0, seed=7, median_tokens=120) as again:
        at95 = _gen(
            tmp_path,
            again.base_url,
            out="at95.jsonl",
            max_tokens=k95,
            pilot=PILOT,
            response_cache=False,
        )
    assert at95.held_max_usd == h95 < pilot.held_max_usd
    text = " ".join(render_result(pilot).split())
    assert f"pilot d0: {PILOT} answers, 0 cut at max_tokens={MAX_TOKENS} (0.0%); output " in text
    assert text.endswith(
        "stopped: pilot: a pilot of the first pilot=20 rows of each dataset; rerun without pilot "
        "to send the other 20 rows of the prompts (the pilot's answers are kept: not sent or paid "
        "again); max_tokens is not changed: give it to change it"
    )


def test_the_full_run_after_a_pilot_resumes_and_pays_for_no_row_twice(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(ROWS, datasets=2))
    with serve(speed=0, seed=3, median_tokens=120, record_requests=True) as fake:
        pilot = _gen(tmp_path, fake.base_url, pilot=PILOT, concurrency=8)
        again = _gen(tmp_path, fake.base_url, pilot=PILOT, concurrency=8)  # nothing left to send
        rest = _gen(tmp_path, fake.base_url, concurrency=8)
        billed = fake.ledger.entries
        bodies = list(fake.fake.requests or [])
    sent = [_row(b) for b in bodies]
    assert pilot.stop_reason == again.stop_reason == StopReason.PILOT
    assert again.requests == 0 and again.rows_already_done == ROWS - 20  # not its 40: the rest
    assert rest.stop_reason == StopReason.DONE and rest.rows_already_done == 2 * PILOT
    assert rest.requests == ROWS - 2 * PILOT
    # every row sent and billed once, across the three runs
    assert sorted(sent) == sorted(f"r{i}" for i in range(ROWS))
    out = records(tmp_path / "out.jsonl")
    assert sorted(r["generation_id"] for r in out) == sorted(e.generation_id for e in billed)
    assert len(billed) == ROWS
    # the pilot's requests ask the response cache as the full run's do: one job, the output's
    job = cache_job(tmp_path / "out.jsonl")
    assert all(b["session_id"] == row_session(_row(b), job=job) for b in bodies)
    # the pilot again reports the same answers it read back from the output
    assert _notes(again, "pilot-lengths") == _notes(pilot, "pilot-lengths")


def test_a_pilot_of_cut_answers_says_the_length_is_unknown(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(10))
    with serve(speed=0, seed=5, median_tokens=120) as fake:
        summary = _gen(tmp_path, fake.base_url, pilot=10, max_tokens=100)
    out = records(tmp_path / "out.jsonl")
    cut = sum(r["status"] == "truncated" for r in out)
    assert cut >= 1  # of 10 answers: neither 95% nor 99% whole can be read
    (lengths,) = _notes(summary, "pilot-lengths")
    assert (lengths.values["answers"], lengths.values["cut"]) == (10, cut)
    (unknown,) = _notes(summary, "pilot-keeps-unknown")
    assert unknown.values["shares"] == "95% or 99%" and not _notes(summary, "pilot-keeps")
    whole = Decimal(10 - cut) / 10
    (useful,) = _notes(summary, "pilot-useful")
    assert useful.values["whole"] == whole
    assert useful.values["useful"] == useful.values["per"] * whole
    assert summary.stop_reason == StopReason.DONE  # a pilot of every row leaves none to send


def test_the_dry_run_of_a_pilot_says_what_it_sends_and_costs_at_most(tmp_path: Path) -> None:
    rows = prompt_rows(ROWS, datasets=2)
    write_prompts(tmp_path / "prompts.jsonl", rows)
    dry = _gen(tmp_path, "http://127.0.0.1:9", pilot=5, dry_run=True, offline=True)
    # the same as the dry run of a prompts file of those rows alone
    write_prompts(tmp_path / "prompts.jsonl", [r for r in rows if int(r["id"][1:]) < 10])
    alone = _gen(tmp_path, "http://127.0.0.1:9", dry_run=True, offline=True)
    assert dry.stop_reason == StopReason.DRY_RUN and dry.rows_to_send == 10
    assert dry.worst_case_usd == alone.worst_case_usd and dry.worst_case_usd
    (said,) = _notes(dry, "pilot-dry-run")
    assert str(said) == (
        "a pilot of the first pilot=5 rows of each dataset: 10 to send (d0 5, d1 5), "
        f"${dry.worst_case_usd:,.4f} at most (their worst case); it then reports their answer "
        "lengths and the max_tokens that keeps 95% and 99% whole"
    )
    assert not (tmp_path / "out.jsonl").exists()


def test_the_cli_takes_pilot_and_its_dry_run_names_the_flags(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(12, datasets=3))
    args = ["generate", str(tmp_path / "prompts.jsonl"), "--policy", str(POLICY), "--out"]
    runner = CliRunner()
    done = runner.invoke(
        cli, [*args, str(tmp_path / "out.jsonl"), "--pilot", "2", "--dry-run", "--offline"]
    )
    assert done.exit_code == 0, done.output
    text = " ".join(done.stdout.split())
    assert (
        "a pilot of the first --pilot 2 rows of each dataset: 6 to send (d0 2, d1 2, d2 2)" in text
    )
    assert "the --max-tokens that keeps 95% and 99% whole" in text
    refused = runner.invoke(cli, [*args, str(tmp_path / "out.jsonl"), "--pilot", "0"])
    assert refused.exit_code == 2 and "--pilot" in refused.output


def test_a_pilot_is_a_whole_number_of_rows(tmp_path: Path) -> None:
    for wrong in (0, -1, True, 2.5):
        with pytest.raises(OptionError, match="pilot"):
            _gen(tmp_path, "http://127.0.0.1:9", pilot=wrong, dry_run=True, offline=True)


def test_the_cli_pilot_says_its_flags_and_its_json_holds_the_figures(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(12, datasets=2))
    args = ["generate", str(tmp_path / "prompts.jsonl"), "--policy", str(POLICY), "--quiet"]
    args += ["--out", str(tmp_path / "out.jsonl"), "--budget-usd", "5", "--pilot", "3"]
    with serve(speed=0, seed=2, median_tokens=120) as fake:
        env = {"OPENROUTER_BASE_URL": fake.base_url, "OPENROUTER_API_KEY": "sk-fake"}
        text = CliRunner().invoke(cli, args, env=env)
        again = CliRunner().invoke(cli, [*args, "--format", "json"], env=env)
    assert text.exit_code == again.exit_code == 0, text.output
    said = " ".join(text.stdout.split())
    assert "pilot d1: 3 answers, 0 cut at --max-tokens 4096 (0.0%); output tokens p50 " in said
    assert "--max-tokens " in said.split("pilot d0: ")[2]  # the length that keeps 95% whole
    assert said.endswith(
        "stopped: pilot: a pilot of the first --pilot 3 rows of each dataset; rerun without "
        "--pilot to send the other 6 rows of the prompts (the pilot's answers are kept: not "
        "sent or paid again); --max-tokens is not changed: give it to change it"
    )
    summary = json.loads(again.stdout)  # the second pilot sends nothing and reports again
    assert summary["stop_reason"] == "pilot" and summary["requests"] == 0
    assert [(d["dataset"], d["answers"], d["rows"]) for d in summary["pilot"]] == [
        ("d0", 3, 6),
        ("d1", 3, 6),
    ]


def test_a_pilot_redoing_cut_answers_reopens_only_the_rows_it_sends(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(ROWS, datasets=2))
    with serve(speed=0, seed=5, median_tokens=120) as fake:
        first = _gen(tmp_path, fake.base_url, max_tokens=100)
        cut = {r["id"] for r in records(tmp_path / "out.jsonl") if r["status"] == "truncated"}
        redo = _gen(tmp_path, fake.base_url, pilot=2, redo_truncated=True)
    pilot_ids = {f"r{i}" for i in range(4)}
    assert first.stop_reason == StopReason.DONE and cut - pilot_ids  # cut rows it never sends
    assert redo.requests == len(cut & pilot_ids) >= 1
    # every row was answered: the rows the pilot does not send stay done
    assert {d: t.done for d, t in redo.datasets.items()} == {"d0": ROWS // 2, "d1": ROWS // 2}
    assert redo.stop_reason == StopReason.PILOT
    assert redo.message.values["left"] == len(cut - pilot_ids)


def test_a_pilot_tells_only_the_unfinished_rows_left_and_is_done_when_none_are(
    tmp_path: Path,
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(ROWS, datasets=2))
    with serve(speed=0, seed=3, median_tokens=120) as fake:
        wide = _gen(tmp_path, fake.base_url, pilot=25)
        narrow = _gen(tmp_path, fake.base_url, pilot=PILOT)  # its rows and 10 more are done
        whole = _gen(tmp_path, fake.base_url, out="whole.jsonl", pilot=ROWS)
        rest = _gen(tmp_path, fake.base_url)
        after = _gen(tmp_path, fake.base_url, pilot=PILOT)
    assert wide.stop_reason == narrow.stop_reason == StopReason.PILOT
    assert wide.message.values["left"] == narrow.message.values["left"] == ROWS - 50
    assert rest.requests == ROWS - 50
    # a pilot of every row, or one after the full run, leaves nothing: done, no "rerun without"
    for done in (whole, after):
        assert done.stop_reason == StopReason.DONE and done.exit_code == 0
        assert "pilot-next" not in {getattr(done.message, "code", None)}
        assert _notes(done, "pilot-lengths")  # it still reports what came back
    assert whole.requests == ROWS and after.requests == 0


def test_a_pilot_of_turn_by_turn_rows_says_they_are_not_measured(tmp_path: Path) -> None:
    turns = [{"role": "user", "content": "question"}, {"role": "assistant", "content": "yes"}]
    rows = [
        {"id": f"r{i}", "dataset": "d0", "messages": [*turns, {"role": "user", "content": "why"}]}
        for i in range(6)
    ]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    with serve(speed=0, seed=2, median_tokens=120) as fake:
        summary = _gen(tmp_path, fake.base_url, pilot=3, turns="all")
    assert summary.ok == 3 and not _notes(summary, "pilot-no-answers")
    (said,) = _notes(summary, "pilot-turns-unmeasured")
    assert str(said) == (
        "pilot d0: 3 rows answered turn by turn (turns='all'): a turn-by-turn row's answers are "
        "not measured (its record is a row, not one answer): nothing to learn of its lengths"
    )
