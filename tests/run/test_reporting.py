"""The run path's reports, and ``verify`` on the same run path as ``generate``.

Retries said on stderr and counted in the text summary; the progress line and the summary at 80
columns; the journal naming the command, model and job that wrote an output (the other command is
refused, another policy warns and resumes); ``--dry-run`` checking that the output's folder takes
files; a budget too small for one row suggesting the ``--max-tokens`` that fits. And ``verify``
getting the lock and the accounting of unknown costs from the run path it shares.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

import openrouter_probe as orp
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.prompts import read_prompts
from openrouter_probe.policy.compiled import load_compiled_policy
from openrouter_probe.rules.routing import RequestParams, route
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.run.progress import LastLine, RichProgress, progress_for
from openrouter_probe.run.report import render_result
from tests._generate import POLICY, LedgerSender, no_sleep, prompt_rows, records, write_prompts
from tests.conftest import PYTEST_OPENROUTER_KEY, ROOT

D = Decimal
MODEL = "moonshotai/kimi-k2.5"


def _env(base_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "OPENROUTER_BASE_URL": base_url,
        "OPENROUTER_API_KEY": PYTEST_OPENROUTER_KEY,
    }


def _cli(tmp: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "openrouter_probe",
        "generate",
        str(tmp / "prompts.jsonl"),
        "--policy",
        str(POLICY),
        "--out",
        str(tmp / "out.jsonl"),
        "--max-tokens",
        "50",
        "--quiet",
        *extra,
    ]


def test_each_retry_is_one_line_on_stderr_and_the_summary_counts_them(tmp_path: Path) -> None:
    """Issue 18: 31 retried rows, 0 lines on stderr, although the README says each is said."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(20))
    with serve(speed=0, seed=1, faults="choice_error=@2+5+9,drop=@11") as fake:
        done = subprocess.run(
            _cli(tmp_path, "--attempts", "3", "--no-budget"),
            env=_env(fake.base_url),
            capture_output=True,
            text=True,
        )
    assert done.returncode == 0, done.stderr
    retried = [line for line in done.stderr.splitlines() if "failed (" in line]
    assert len(retried) == 4
    for line in retried:
        assert re.fullmatch(r"r\d+: attempt 1 failed \(.+\); retrying in \d+\.\d s", line), line
    assert sum("connection reset by peer" in line for line in retried) == 3
    assert "24 requests, 4 retried" in done.stdout


def _progress(width: int) -> tuple[RichProgress, io.StringIO]:
    from rich.console import Console

    stream = io.StringIO()
    return RichProgress(40, console=Console(file=stream, width=width, force_terminal=True)), stream


@pytest.mark.parametrize("width", [80, 200])
def test_the_progress_line_keeps_rows_money_and_eta_first(tmp_path: Path, width: int) -> None:
    """Issue 18: at 80 columns the line dropped rows done, the bar, the elapsed time and the ETA
    and kept a provider list; `N/s` after `tok` read as tokens per second."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))
    bar, stream = _progress(width)
    lines: list[str] = []
    original = bar.tick

    def tick(run: Any) -> None:
        original(run)
        lines.append(bar.line(run))

    bar.tick = tick  # type: ignore[method-assign]
    asyncio.run(
        generate(
            tmp_path / "prompts.jsonl",
            policy=POLICY,
            out=tmp_path / "out.jsonl",
            send=LedgerSender(seed=2),
            snapshot="bundled",
            budget_usd=5,
            max_tokens=50,
            progress=bar,
        )
    )
    last = lines[-1]
    assert len(last) <= width
    assert re.match(r"40/40 rows  \$0\.\d{4}/\$5\.00  ETA 0:00:00", last), last
    assert re.search(r"\d[\d,.]* rows/s", last) and " tok" in last
    assert ("Chutes:40" in last) is (width == 200)  # the provider list goes first
    assert "\x1b" in stream.getvalue()  # drawn on the (forced) terminal


@pytest.mark.parametrize("columns", ["60", "0"])  # COLUMNS=0 is unset: the terminal's, or 80
def test_where_nothing_redraws_it_the_last_progress_line_is_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))
    stream = io.StringIO()
    bar = LastLine(40, file=stream)
    asyncio.run(
        generate(
            tmp_path / "prompts.jsonl",
            policy=POLICY,
            out=tmp_path / "out.jsonl",
            send=LedgerSender(seed=2),
            snapshot="bundled",
            budget_usd=5,
            max_tokens=50,
            progress=bar,
        )
    )
    written = stream.getvalue()
    assert written.count("\n") == 1 and written.endswith("\n")  # one line, at the end
    assert re.match(r"40/40 rows  \$0\.\d{4}/\$5\.00  ETA 0:00:00", written), written
    assert len(written) - 1 <= int(columns) or columns == "0"
    assert "\x1b" not in written


@pytest.mark.parametrize(
    ("terminal", "environ", "kind"),
    [
        (True, {}, RichProgress),
        (False, {}, LastLine),
        (False, {"FORCE_COLOR": "1"}, RichProgress),
        (False, {"TTY_COMPATIBLE": "1"}, RichProgress),
        (True, {"TTY_COMPATIBLE": "0"}, LastLine),
    ],
)
def test_the_live_line_is_rich_where_it_is_redrawn(
    monkeypatch: pytest.MonkeyPatch, terminal: bool, environ: dict[str, str], kind: type
) -> None:
    class Stderr(io.StringIO):
        def isatty(self) -> bool:
            return terminal

    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "stderr", Stderr())
    assert type(progress_for(10)) is kind


def test_the_summary_fits_80_columns_and_never_cuts_a_figure(tmp_path: Path) -> None:
    """Issue 18: the end-of-run summary wrapped mid-number (`B6 151,9` / `80`)."""
    names = [f"B{i}" for i in range(3, 9)]
    rows = [
        {"id": f"{name}-{i}", "dataset": name, "prompt": f"question {i}"}
        for i in range(30)
        for name in names
    ]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    summary = asyncio.run(
        generate(
            tmp_path / "prompts.jsonl",
            policy=POLICY,
            out=tmp_path / "out.jsonl",
            send=LedgerSender(seed=3),
            snapshot="bundled",
            budget_usd="123456.78",
            max_tokens=3000,
        )
    )
    text = render_result(summary)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    flat = " ".join(line.strip() for line in text.splitlines())
    for name in names:  # every figure whole, on one line
        tokens = summary.datasets[name].output_tokens
        assert f"  {name}: 30/30 rows, {tokens:,} tok, $" in text
    assert f"${summary.spent_total_usd:,.6f} in all of $123,456.78" in flat
    assert "180 requests, 0 retried" in flat


def test_the_other_command_is_refused_and_another_policy_warns(tmp_path: Path) -> None:
    """Issue 18: `verify --out r.jsonl` onto a generate output appended verify rows, and export
    put arithmetic probes into the training file. The journal names the command, model and job."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(5))
    out = tmp_path / "out.jsonl"

    def gen(policy: Path) -> Any:
        return asyncio.run(
            generate(
                tmp_path / "prompts.jsonl",
                policy=policy,
                out=out,
                send=LedgerSender(seed=4),
                snapshot="bundled",
                max_tokens=20,
            )
        )

    gen(POLICY)
    with serve(speed=0) as fake, pytest.raises(ConfigError) as info:
        asyncio.run(
            orp.verify_precision(
                MODEL,
                out=out,
                endpoints=["chutes/int4"],
                n=2,
                snapshot="bundled",
                base_url=fake.base_url,
                api_key="sk-fake",
            )
        )
    message = str(info.value)
    assert message == (
        f"{out} was written by `generate` ({POLICY}); `verify` does not add rows to it: "
        "give out= another file"
    )
    assert len(records(out)) == 5
    # the same command under a re-compiled policy: a warning, and finished rows are kept
    doc = yaml.safe_load(POLICY.read_text())
    doc["provider"]["ignore"] = [*doc["provider"]["ignore"], "venice"]
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(doc))
    again = gen(other)
    assert again.requests == 0 and again.rows_already_done == 5
    assert any(f"{out} was written under another policy ({POLICY})" in w for w in again.warnings)


def test_generate_refuses_a_verify_output(tmp_path: Path) -> None:
    out = tmp_path / "v.jsonl"
    with serve(speed=0) as fake:
        asyncio.run(
            orp.verify_precision(
                MODEL,
                out=out,
                endpoints=["chutes/int4"],
                n=2,
                snapshot="bundled",
                base_url=fake.base_url,
                api_key="sk-fake",
            )
        )
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(2))
    with pytest.raises(
        ConfigError, match=r"was written by `verify` \(verify .+\); `generate` does"
    ):
        asyncio.run(
            generate(
                tmp_path / "prompts.jsonl",
                policy=POLICY,
                out=out,
                send=LedgerSender(),
                snapshot="bundled",
            )
        )


def test_dry_run_checks_the_output_folder(tmp_path: Path) -> None:
    """Issue 18: --dry-run did not check that the output folder is writable."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(2))

    def dry(out: Path) -> Any:
        return asyncio.run(
            generate(
                tmp_path / "prompts.jsonl",
                policy=POLICY,
                out=out,
                snapshot="bundled",
                dry_run=True,
            )
        )

    missing = tmp_path / "no-such-folder" / "out.jsonl"
    with pytest.raises(ConfigError, match=r"the folder .*no-such-folder does not exist; create it"):
        dry(missing)
    # /proc takes no new file, even for root (whom os.access lets write anywhere)
    with pytest.raises(ConfigError, match=r"out=/proc/out\.jsonl: cannot write in /proc"):
        dry(Path("/proc/out.jsonl"))
    assert dry(tmp_path / "out.jsonl").stop_reason == "dry-run"
    assert not (tmp_path / "out.jsonl").exists()  # a dry run creates no output


def test_a_budget_too_small_for_one_row_says_the_max_tokens_that_fits(tmp_path: Path) -> None:
    """Issue 18: a budget too small for one worst-case row: suggest the --max-tokens that fits."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    sender = LedgerSender()
    budget = D("0.001")

    def gen(max_tokens: int) -> Any:
        return asyncio.run(
            generate(
                tmp_path / "prompts.jsonl",
                policy=POLICY,
                out=tmp_path / "out.jsonl",
                send=sender,
                snapshot="bundled",
                budget_usd=budget,
                max_tokens=max_tokens,
            )
        )

    from openrouter_probe.rules.sampling import sampling_advice
    from openrouter_probe.run.books.overshoot import Overshoot
    from openrouter_probe.run.money.spend import Prices
    from openrouter_probe.run.send.request import RequestBuilder

    summary = gen(4096)
    assert summary.stop_reason == "budget" and sender.bodies == []
    found = re.search(r"max_tokens=(\d+) would fit", summary.message)
    assert found, summary.message
    fits = int(found.group(1))
    # the largest that fits: its worst case within the budget, one more token beyond it
    block = load_compiled_policy(POLICY).provider
    prices = Prices.worst_case(route(block, bundled_snapshot().endpoints, RequestParams()).admitted)
    row = read_prompts(tmp_path / "prompts.jsonl").rows[0]
    # the row's body as the run sends it: its session_id (the response cache) and the sampling
    # its card fixes are prompt bytes too
    builder = RequestBuilder(
        model=MODEL, provider_json="{}", identity=True, advice=sampling_advice(MODEL)
    )
    room = Overshoot().extra_usd  # and the room each reservation keeps past max_tokens

    def worst(max_tokens: int) -> Decimal:
        return builder.build(row, prices, max_tokens=max_tokens).worst_usd + room(
            max_tokens, prices.output_usd_per_token
        )

    assert worst(fits) <= budget
    assert worst(fits + 1) > budget
    assert gen(fits).requests >= 1


# -- verify on the same run path ------------------------------------------------------------------


def test_verify_takes_the_outputs_lock(tmp_path: Path) -> None:
    out = tmp_path / "v.jsonl"
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(5))
    gate = asyncio.Event()
    holder = LedgerSender(gate=gate)

    async def scenario(base_url: str) -> str:
        task = asyncio.ensure_future(
            generate(
                tmp_path / "prompts.jsonl",
                policy=POLICY,
                out=out,
                send=holder,
                snapshot="bundled",
                max_tokens=20,
            )
        )
        while holder.in_flight < 5:
            await asyncio.sleep(0)
        try:
            await orp.verify_precision(
                MODEL,
                out=out,
                endpoints=["chutes/int4"],
                n=2,
                snapshot="bundled",
                base_url=base_url,
                api_key="sk-fake",
            )
        except ConfigError as exc:
            return str(exc)
        finally:
            gate.set()
            await task
        return ""

    with serve(speed=0) as fake:
        message = asyncio.run(scenario(fake.base_url))
        assert len(fake.ledger) == 0
    assert message.startswith(f"{out} is in use by `generate` (pid {os.getpid()} on ")


def test_verify_counts_unknown_costs_and_settles_them(tmp_path: Path) -> None:
    """An answer without usage.cost (a choice error): verify counts it at its worst case and the
    reconciler settles it from /generation, as generate does."""
    out = tmp_path / "v.jsonl"
    with serve(speed=0, seed=5, faults="choice_error=@1+2") as fake:
        report = asyncio.run(
            orp.verify_precision(
                MODEL,
                out=out,
                endpoints=["chutes/int4", "deepinfra/int4"],
                n=4,
                snapshot="bundled",
                base_url=fake.base_url,
                api_key="sk-fake",
                budget_usd=1,
                sleep=no_sleep,
                thinking="off",  # no pilot: the faulted requests are the check's own
            )
        )
        run = report.run
        assert run is not None
        assert run.reconciled == 2 and run.possibly_billed_usd == 0
        assert run.spent_usd == fake.ledger.total_usd


def test_a_policy_for_an_unknown_model_names_the_policy(tmp_path: Path) -> None:
    """Review of 0.2.0: a policy whose model OpenRouter does not know said only "No endpoints
    found for acme/nonexistent-1", not which file holds that model nor what to fix."""
    from openrouter_probe.errors import PolicyError

    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(2))
    policy = tmp_path / "bad.yaml"
    policy.write_text(POLICY.read_text().replace("moonshotai/kimi-k2.5", "acme/nonexistent-1"))
    with serve(speed=0) as fake, pytest.raises(PolicyError) as info:
        asyncio.run(
            generate(tmp_path / "prompts.jsonl", policy=policy, out=tmp_path / "out.jsonl",
                     base_url=fake.base_url, api_key="sk-x", dry_run=True)
        )  # fmt: skip
    message = str(info.value)
    assert message.startswith(f"{policy}: its model: No endpoints found for acme/nonexistent-1")
    assert message.endswith("fix `model` in the policy's spec and re-compile it")
    assert not (tmp_path / "out.jsonl").exists()


def test_a_dry_run_does_not_claim_to_settle(tmp_path: Path) -> None:
    """Review of 0.2.0: a dry run after a kill said "settled from /generation this run: 0
    attempt(s)", though a dry run settles nothing."""
    from openrouter_probe.run.result import RunResult as RunSummary
    from openrouter_probe.run.stop import StopReason

    summary = RunSummary(
        out="out.jsonl",
        policy="p.yaml",
        model="m",
        journal="out.jsonl.ledger",
        possibly_billed_before_usd=Decimal("0.0124"),
        killed_in_flight_before=1,
        stop_reason=StopReason.DRY_RUN,
    )
    text = render_result(summary)
    assert "settled from /generation this run" not in text
    assert "a real run settles what it can from /generation" in text
    summary = dataclasses.replace(summary, stop_reason=StopReason.DONE)
    assert "settled from /generation this run: 0 attempt(s)" in render_result(summary)


def test_the_advice_for_datasets_is_what_fits_every_share_at_the_start(tmp_path: Path) -> None:
    """Review of 0.2.0: six same-sized datasets under a tiny cap were advised --max-tokens 229,
    280, 356, 464, 680 and 1616: each figure counted the shares that datasets closed before it
    had lent. The next start has every dataset open: the advice is each one's share then."""
    rows = [
        {"id": f"{name}-{i}", "dataset": name, "prompt": f"question {i} " + "x" * 40}
        for i in range(3)
        for name in ("B3", "B4", "B5", "B6", "B7", "B8")
    ]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    sender = LedgerSender()

    def gen(max_tokens: int) -> Any:
        return asyncio.run(
            generate(tmp_path / "prompts.jsonl", policy=POLICY, out=tmp_path / "out.jsonl",
                     send=sender, snapshot="bundled", budget_usd="0.005", max_tokens=max_tokens)
        )  # fmt: skip

    summary = gen(4096)
    assert summary.stop_reason == "budget" and sender.bodies == []
    advice = {int(n) for n in re.findall(r"max_tokens=(\d+) would fit its share", summary.message)}
    assert len(advice) == 1, summary.message  # the same rows, the same shares: one figure
    again = gen(advice.pop())
    assert all(tally.done >= 1 for tally in again.datasets.values()), again.datasets


# -- issue 26: the books' figures add up -------------------------------------------------------


def _six_datasets(tmp_path: Path, per: int = 6) -> list[str]:
    names = [f"B{i}" for i in range(3, 9)]
    rows = [
        {"id": f"{name}-{i}", "dataset": name, "prompt": f"question {name}-{i} " + "x" * 40}
        for i in range(per)
        for name in names
    ]
    write_prompts(tmp_path / "prompts.jsonl", rows)
    return names


def test_the_budget_stop_names_each_dataset_once(tmp_path: Path) -> None:
    """Issue 26: with six datasets the budget stop read "...; and 4 more" (and "and 9 more"):
    every retry that found its dataset's money out added another entry. Every first attempt
    fails here, so each row waits for the money again, from several workers at once."""
    names = _six_datasets(tmp_path)

    def fail(request: dict[str, Any], attempt: int) -> Any:
        from tests._generate import http_failure

        return http_failure(503, "overloaded") if attempt == 1 else None

    summary = asyncio.run(
        generate(tmp_path / "prompts.jsonl", policy=POLICY, out=tmp_path / "out.jsonl",
                 send=LedgerSender(seed=4, fail=fail), snapshot="bundled", sleep=no_sleep,
                 budget_usd="0.004", max_tokens=400, concurrency=12)
    )  # fmt: skip
    assert summary.stop_reason == "budget", render_result(summary)
    named = re.findall(r"(?:^|; )(B\d): ", summary.message)
    more = re.search(r"; and (\d+) more$", summary.message)
    assert len(named) == len(set(named)) == min(3, len(named))
    closed = len(named) + (int(more.group(1)) if more else 0)
    assert 1 <= closed <= len(names), summary.message
    assert closed == sum(1 for t in summary.datasets.values() if t.done < t.rows)


def test_rows_turns_and_requests_are_counted_in_one_unit(tmp_path: Path) -> None:
    """Issue 26: "turns (--turns all): 1,125 requests for the rows to send; 92 answered" after
    "272 requests": the 92 counted only the turns of multi-turn rows. Every request sends one
    turn: to send, answered and requests agree when nothing is retried."""
    examples = ROOT / "examples" / "prompts.jsonl"

    class Sender(LedgerSender):
        def row_id(self, request: dict[str, Any]) -> str:
            return str(len(self.bodies))  # the examples' prompts are not "question N"

    summary = asyncio.run(
        generate(examples, policy=POLICY, out=tmp_path / "out.jsonl", send=Sender(seed=5),
                 snapshot="bundled", max_tokens=50_000, budget_usd=5, turns="all")
    )  # fmt: skip
    assert summary.stop_reason == "done" and summary.ok + summary.truncated == 18
    assert summary.turns_to_send == summary.turns_done == summary.requests == 20
    assert sum(t.turns for t in summary.providers.values()) == 20
    text = " ".join(render_result(summary).split())
    assert "; 20 requests, 0 retried" in text
    assert "turns (turns='all'): 20 to send for the rows to send; 20 answered" in text


def test_the_last_progress_line_of_a_budget_stop_shows_no_eta(tmp_path: Path) -> None:
    """Issue 26: a run stopped by its budget ended on a line with an ETA for rows it will
    never send."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))
    bar, _ = _progress(200)
    lines: list[str] = []
    original = bar.tick

    def tick(run: Any) -> None:
        original(run)
        lines.append(bar.line(run))

    bar.tick = tick  # type: ignore[method-assign]
    summary = asyncio.run(
        generate(tmp_path / "prompts.jsonl", policy=POLICY, out=tmp_path / "out.jsonl",
                 send=LedgerSender(seed=2), snapshot="bundled", budget_usd="0.02",
                 max_tokens=400, progress=bar)
    )  # fmt: skip
    assert summary.stop_reason == "budget" and 0 < summary.ok + summary.truncated < 40
    assert "ETA" not in lines[-1] and "stopped: budget" in lines[-1], lines[-1]
    assert re.match(r"\d+/40 rows  \$0\.\d{4}/\$0\.02  stopped: budget", lines[-1])
