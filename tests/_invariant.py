"""The money invariant under random fault mixes, kills and races: one seeded scenario.

A scenario draws (from its seed) a prompt set, a budget, streaming or not, a read timeout, and a
mix of every fault kind the fake server has, and ``--turns last`` or ``all`` (then a third of the
rows are multi-turn, each turn its own request), then runs ``generate`` on one output several
times:

1. a child process (``tests._child``), killed with SIGKILL at a random point (or left to end);
2. while it runs, a second run on the same output from this process: the race (refused by the
   lock while the child holds it; a plain resume if the child has ended);
3. another child resuming, maybe killed too;
4. a last resume in this process, to the end or the cap.

Then it checks what ``docs/generate.md`` promises ("What the cap guarantees"): what the fake billed
<= the cap; what the client counts (the journal, and records of runs it does not know, as the next
start counts them) >= what the fake billed; no row recorded as finished twice; every finished
record's cost is its generation's in the fake's ledger; and every billed generation no record holds
is one the journal counts (by its generation id, or as an attempt with none); a record answered by
the response cache (a row resent after its answer was lost) is billed nothing and counted $0. With
``--turns all``:
every turn's cost is its generation's, and a turn the turns file kept was never bought again (one
line per turn, and the finished row holds that very turn).

``tests/run/money/test_invariant.py`` runs a few seeds in CI; ``scripts/soak_invariant.py`` runs many.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import FAULT_KINDS, serve
from openrouter_probe.generation import generate
from openrouter_probe.run.books.output import load_resume_state
from openrouter_probe.run.money.replay import replay_journal
from tests._child import batch_options

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "policies" / "kimi-k2.5.yaml"
#: Seconds (real: the fake runs on the system clock) for the faults that wait.
WAITS = {
    "slow_first_byte": 0.05,
    "stall": 0.05,
    "keepalive": 0.05,
    "platform_429": 1,
    "in_flight_402": 0,  # Retry-After: 0 (a child waits for real)
}
#: ``overbill``'s factor here (not seconds): billing past max_tokens within the margin every
#: reservation keeps before an overshoot is seen (``run.books.overshoot``: 5% plus 16 tokens), so the
#: cap holds whatever the concurrency of the first requests; a 6x provider, learned from its
#: first answers, is ``tests/run/books/test_past_max_tokens.py``'s
WAITS["overbill"] = 1.05


@dataclass
class Outcome:
    """What a scenario did and found."""

    seed: int
    budget_usd: Decimal
    billed_usd: Decimal
    counted_usd: Decimal
    generations: int
    finished: int
    kills: int = 0
    refused: int = 0
    turns: str = "last"
    kept_turns: int = 0  # lines of the turns file (turns kept while their row was unfinished)
    twice: int = 0  # batch mode: rows billed in two completed batches (the cap paid for both)
    runs: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    searching: int = 0  # rows with a web search server tool
    searched: int = 0  # finished records whose answer ran a web search
    byok: int = 0  # finished records answered BYOK (the provider's part billed to the key)

    def line(self) -> str:
        return (
            f"seed {self.seed}: billed ${self.billed_usd} <= cap ${self.budget_usd}, counted "
            f"${self.counted_usd}; {self.generations} generations, {self.finished} rows finished; "
            f"{self.kills} kill(s), {self.refused} refused; --turns {self.turns} "
            f"({self.kept_turns} kept); {self.twice} row(s) bought twice; {self.searching} "
            f"row(s) searching ({self.searched} searched), {self.byok} BYOK; runs: "
            f"{', '.join(self.runs)}"
        )


def _faults(rng: random.Random) -> str:
    """Every fault kind at a random rate (some absent), the waiting ones short."""
    parts = []
    for kind in sorted(FAULT_KINDS):
        if kind in SEPARATE_DRAWS or kind in NOT_DRAWN:
            continue
        rate = rng.choice([0, 0, 0.02, 0.05, 0.1])
        if rate:
            wait = WAITS.get(kind)
            parts.append(f"{kind}={rate}" + (f"/{wait}" if wait is not None else ""))
    return ",".join(parts)


#: Fault kinds drawn from their own seed (``_separate``), so that the draws of the others stay what
#: they were before these kinds were added: the in-flight 402, BYOK answers (the provider's part
#: billed to the user's key, in ``cost_details``).
SEPARATE_DRAWS = ("in_flight_402", "byok")
#: The account's refusals stop a run at the first one, and the in-flight 402 whose wait is in its
#: body is the in-flight 402 again (``tests/run/send/test_account_refusals.py``): not in the random mix.
NOT_DRAWN = ("attestation_403", "guardrail_404", "org_budget_403", "in_flight_402_body")
#: The web search server tool some rows carry (``_server_tools``), its searches in the bill.
WEB_SEARCH = {"type": "openrouter:web_search", "parameters": {"max_uses": 1, "max_results": 2}}
#: The rates each of ``SEPARATE_DRAWS`` is drawn from (the others: up to 5%).
RATES = {"in_flight_402": [0, 0.02, 0.05, 0.1], "byok": [0, 0, 0.05, 0.2]}


def _separate(seed: int) -> str:
    rng = random.Random(seed + 200_000)
    parts = []
    for kind in SEPARATE_DRAWS:
        rate = rng.choice(RATES.get(kind, [0, 0, 0.02, 0.05]))
        if rate:
            parts.append(f"{kind}={rate}/{WAITS.get(kind, 0)}")
    return ",".join(parts)


def _server_tools(path: Path, seed: int, budget: Decimal) -> int:
    """Give about a tenth of the rows a web search (in the scenarios whose cap holds such a
    request: its worst case counts the whole context); return how many. Drawn apart."""
    rng = random.Random(seed + 300_000)
    if budget < 1:
        return 0
    lines, searching = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if rng.random() < 0.1:
            row["tools"] = [WEB_SEARCH]
            searching += 1
        lines.append(json.dumps(row) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return searching


def _prompts(path: Path, rng: random.Random, rows: int) -> None:
    datasets = rng.randint(1, 3)
    lines = []
    for i in range(rows):
        row: dict[str, Any] = {
            "id": f"r{i}",
            "dataset": f"d{i % datasets}",
            "prompt": f"question {i} " + "x" * rng.randint(1, 200),
        }
        if rng.random() < 0.1:
            row["max_tokens"] = rng.randint(10, 200)
        lines.append(json.dumps(row) + "\n")
    path.write_text("".join(lines), encoding="utf-8")


def _multi_turn(path: Path, rng: random.Random) -> None:
    """Make about a third of the rows multi-turn: two or three turns each (``--turns all``)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if rng.random() < 0.35:
            first = {"role": "user", "content": row.pop("prompt")}
            messages = [first, {"role": "assistant", "content": "copied " * rng.randint(1, 9)}]
            messages.append({"role": "user", "content": "and then? " + "y" * rng.randint(1, 99)})
            if rng.random() < 0.5:
                messages += [
                    {"role": "assistant", "content": "again"},
                    {"role": "user", "content": "z"},
                ]
            row["messages"] = messages
            # long enough for most turns to finish (a turn cut at max_tokens ends its row)
            row["max_tokens"] = rng.randint(400, 900)
        lines.append(json.dumps(row) + "\n")
    path.write_text("".join(lines), encoding="utf-8")


def _options(tmp: Path, rng: random.Random, budget: Decimal, base_url: str) -> dict[str, Any]:
    return {
        "prompts": str(tmp / "prompts.jsonl"),
        "policy": str(POLICY),
        "out": str(tmp / "out.jsonl"),
        "budget_usd": str(budget),
        "max_tokens": rng.choice([50, 100, 300]),
        "source": {"row_params": "max_tokens"},  # a row's own max_tokens, where it has one
        "stream": rng.random() < 0.5,
        "concurrency": rng.choice([4, 16, 64]),
        "read_timeout_s": rng.choice([300.0, 0.02]),
        "attempts": rng.choice([2, 4, 6]),
        "base_url": base_url,
        "api_key": "sk-invariant",
    }


async def _no_sleep(seconds: float) -> None:
    await asyncio.sleep(0)


def _in_process(options: dict[str, Any], **waits: Any) -> str:
    """A run in this process; returns its stop reason, or ``refused`` when the lock was held.
    ``waits`` replace its sleep (by default none) and clock."""
    args = batch_options(dict(options))
    prompts = args.pop("prompts")
    try:
        summary = asyncio.run(generate(prompts, **({"sleep": _no_sleep} | waits), **args))
    except ConfigError as exc:
        if "is in use by" not in str(exc):
            raise
        return "refused"
    return summary.stop_reason


def _child(options: dict[str, Any], fake: Any, kill_at: int | None) -> tuple[str, bool]:
    """A run in a child process that dies (as by SIGKILL) at the return of its ``kill_at``-th
    request, whose money is not yet journaled: the child kills itself
    (``tests._child.kill_points``), so whether the kill lands does not depend on how fast this
    process watches; a child that never gets that many answers finishes."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if kill_at is not None:
        env["CHILD_KILL"] = f"answer:{kill_at}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests._child", json.dumps(options)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    killed = False
    deadline = time.monotonic() + 60
    race: str | None = None
    before = len(fake.ledger)
    while proc.poll() is None and time.monotonic() < deadline:
        if race is None and len(fake.ledger) > before:
            race = _in_process(options)  # a second run on the same output, while it runs
        time.sleep(0.002)  # polling the child's progress in the fake's ledger
    if proc.poll() is None:
        proc.kill()  # a child that hangs: killed all the same, and the invariant must hold
        killed = True
    out, err = proc.communicate()
    killed = killed or proc.returncode == 9  # it died at its own kill point
    if not killed and proc.returncode == 3 and b"is in use by" in err:
        return "refused", False  # the race went the other way: this process held the output
    if not killed and proc.returncode not in (0, 1):
        raise AssertionError(f"the child failed ({proc.returncode}): {err[-2000:]}")
    status = "killed" if killed else (json.loads(out)["stop_reason"] if out else "?")
    return f"{status}" + (f" (race: {race})" if race else ""), killed


def _finished(
    out: Path, outcome: Outcome, problems: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The output's records and its finished ones, counted into ``outcome``. A row recorded ``failed`` may be
    recorded again: its answer, found in a lost submit's batch (it wins), or ``failed`` once
    more; never two answers, never ``failed`` after an answer (a problem)."""
    records = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    finished = [r for r in records if r["status"] in ("ok", "truncated", "failed")]
    outcome.finished = len({r["id"] for r in finished})
    for r in finished:
        usage = r.get("usage") if isinstance(r.get("usage"), dict) else {}
        outcome.searched += "server_tool_use_details" in usage
        outcome.byok += usage.get("is_byok") is True
    answered: set[str] = set()
    twice_finished = 0
    for r in finished:
        twice_finished += r["id"] in answered
        if r["status"] != "failed":
            answered.add(r["id"])
    if twice_finished:
        problems.append(f"{twice_finished} row(s) recorded as finished after their answer")
    return records, finished


def _check(out: Path, fake: Any, budget: Decimal, outcome: Outcome) -> None:
    ledger = fake.ledger
    replay = replay_journal(Path(f"{out}.ledger"))
    state = load_resume_state(out, journal_runs=replay.runs, adopted=replay.adopted, repair=False)
    assert not state.unjournaled  # every record's money is the journal's
    outcome.counted_usd = replay.spent_usd
    outcome.billed_usd = ledger.total_usd
    outcome.generations = len(ledger)
    problems = outcome.problems
    if ledger.total_usd > budget:
        problems.append(f"billed ${ledger.total_usd} over the cap ${budget}")
    if outcome.counted_usd < ledger.total_usd:
        problems.append(f"counted ${outcome.counted_usd} under the billed ${ledger.total_usd}")
    records, finished = _finished(out, outcome, problems)
    for r in finished:
        for answer in r.get("turns") or [r]:  # a row regenerated turn by turn: each turn
            entry = ledger.get(answer["generation_id"]) if answer.get("generation_id") else None
            if answer.get("response_cache") == "hit":  # a replay: its generation billed nothing
                if entry is not None or answer.get("cost_usd") != 0:
                    problems.append(f"{r['id']}: a response cache hit billed or counted")
                continue
            if answer.get("cost_usd") is not None and (
                entry is None or Decimal(str(answer["cost_usd"])) != entry.cost_usd
            ):
                problems.append(f"{r['id']}: cost {answer['cost_usd']} is not its generation's")
    kept = _check_kept_turns(out, finished, problems)
    outcome.kept_turns = len(kept)
    _check_unrecorded(out, records + kept, ledger, replay, problems)


def _check_kept_turns(
    out: Path, finished: list[dict[str, Any]], problems: list[str]
) -> list[dict[str, Any]]:
    """A turn the turns file kept was bought once: one line per (row, turn), and a finished row
    holds that very turn. Returns the kept turns (as records of their generations)."""
    path = Path(f"{out}.turns")
    lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    seen: set[tuple[str, int]] = set()
    rows = {r["id"]: r for r in finished if r["status"] != "failed"}
    for line in lines:
        key = (line["id"], line["turn"]["index"])
        if key in seen:
            problems.append(f"{key}: a kept turn was bought again")
        seen.add(key)
        row = rows.get(line["id"])
        if row is not None:
            held = {t["index"]: t for t in row.get("turns") or []}
            if held.get(key[1]) != line["turn"]:
                problems.append(f"{key}: the finished row does not hold the kept turn")
    return [line["turn"] for line in lines]


def _check_unrecorded(
    out: Path, records: list[dict[str, Any]], ledger: Any, replay: Any, problems: list[str]
) -> None:
    """Every billed generation no record holds is one the journal counts."""
    known: set[str] = set()
    without_id = 0
    attempts: dict[tuple[str, int], bool] = {}
    for line in Path(f"{out}.ledger").read_text().splitlines():
        item = json.loads(line)
        if "sent" in item:
            attempts[(item["run"], item["sent"])] = False
        elif "gen" in item:
            known.add(item["id"])
            attempts[(item["run"], item["gen"])] = True
    without_id = sum(1 for has_id in attempts.values() if not has_id)
    recorded = {a.get("generation_id") for r in records for a in [r, *(r.get("turns") or [])]}
    stray = [e for e in ledger.entries if e.generation_id not in recorded | known]
    if len(stray) > without_id:
        problems.append(f"{len(stray)} billed generation(s) the journal does not know")


def run_scenario(seed: int, tmp: Path, *, rows: int | None = None) -> Outcome:
    """Run the scenario of ``seed`` in the folder ``tmp``; return what it found."""
    rng = random.Random(seed)
    count = rows or rng.randint(60, 240)
    _prompts(tmp / "prompts.jsonl", rng, count)
    # drawn apart, so that the other draws of a seed stay what they were before --turns
    turns_rng = random.Random(seed + 100_000)
    turns = turns_rng.choice(["last", "all"])
    if turns == "all":
        _multi_turn(tmp / "prompts.jsonl", turns_rng)
    budget = Decimal(rng.choice(["0.01", "0.03", "0.08", "1"]))
    searching = _server_tools(tmp / "prompts.jsonl", seed, budget)
    faults = ",".join(f for f in (_faults(rng), _separate(seed)) if f)
    lag = rng.choice([0, 0, 0.2])
    with serve(speed=0, seed=seed, faults=faults or None, generation_lag_s=lag) as fake:
        options = {**_options(tmp, rng, budget, fake.base_url), "turns": turns}
        outcome = Outcome(seed, budget, Decimal(0), Decimal(0), 0, 0, turns=turns)
        outcome.searching = searching
        for step in range(2):
            # a kill point every first run reaches (the smallest, stopped by its cap, sends 9
            # requests), with up to 64 in flight: a later one would land or not by how far
            # the run got before its cap, which is the machine's load as much as the seed's
            kill_at = rng.randint(1, 8) if rng.random() < 0.7 else None
            status, killed = _child(options, fake, kill_at)
            outcome.kills += killed
            outcome.refused += "refused" in status
            outcome.runs.append(f"child {status}")
            if step == 0:
                options = {**options, **_options(tmp, rng, budget, fake.base_url)}
        outcome.runs.append(f"last {_in_process(options)}")
        _check(tmp / "out.jsonl", fake, budget, outcome)
    return outcome


# -- batch mode (generate --batch) ------------------------------------------------------------

BATCH_EXAMPLE = ROOT / "examples" / "batch"
#: Faults of the fake's Batch API a batch scenario draws from (some of them, at random).
BATCH_FAULTS = ("batch_expire=@1", "line_fail=0.1", "batch_404=@1", "stuck=@2", "batch_failed=@3")


#: Kill points where the child kills itself (``tests._child.kill_points``), the fake's clock
#: moving while it polls so that its batches finish: while a finished batch's results are being
#: written; right after the run's first ``batch_plan`` line (a resume's: a line moved to it);
#: right after a POST made its batch, before the answer is read (the orphan search's case).
SELF_KILLS = {"write": "write:{n}", "moved": "plan:1", "create": "create:1"}


def _batch_child(
    options: dict[str, Any], journal: Path, kill: str, waits: dict[str, Any], *, clock: Any = None
) -> tuple[str, bool]:
    """A ``--batch`` run in a child, SIGKILLed at ``kill``: once the journal holds a batch plan
    (before or just after the POST), its id (while polling), or after a few polls; the fake's
    clock stands still for the child, so its batches never finish: it is always killed. Or it
    kills itself at one of ``SELF_KILLS`` (``write:3``: the third record), the fake's clock
    (``clock``) moved on while it polls."""
    point = kill.partition(":")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if point[0] in SELF_KILLS:
        env["CHILD_KILL"] = SELF_KILLS[point[0]].format(n=point[2] or 1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests._child", json.dumps(options)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    mark = {"plan": '"batch_plan"', "id": '"batch_id"', "poll": '"batch_id"'}.get(kill)
    deadline = time.monotonic() + (60 if mark else 20)
    race: str | None = None
    seen_at: float | None = None
    # a child that kills itself is raced once it holds the output (its header is journaled):
    # a race that went first would leave it nothing to die in
    before = len(journal.read_text(encoding="utf-8")) if mark is None and journal.exists() else 0
    while proc.poll() is None and time.monotonic() < deadline:
        text = journal.read_text(encoding="utf-8") if journal.exists() else ""
        if race is None and len(text) > before:
            race = _in_process(options, **waits)  # a second run on the same output
        if mark is None:
            if clock is not None and '"batch_id"' in text:
                clock.advance(60)  # its batches run on: it dies at its own point
        elif seen_at is None and mark in text:
            seen_at = time.monotonic()
        if seen_at is not None and time.monotonic() - seen_at >= (0.2 if kill == "poll" else 0):
            break
        time.sleep(0.002)  # polling the child's progress in its journal
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate()
    if proc.returncode == 9 and "CHILD_KILL" in env:
        killed = True  # it died at its own point
    if not killed and proc.returncode == 3 and b"is in use by" in err:
        return "refused", False
    if not killed and proc.returncode not in (0, 1):
        raise AssertionError(f"the child failed ({proc.returncode}): {err[-2000:]}")
    status = f"killed at {kill}" if killed else (json.loads(out)["stop_reason"] if out else "?")
    return status + (f" (race: {race})" if race else ""), killed


def _check_batches(out: Path, fake: Any, budget: Decimal, outcome: Outcome) -> None:
    """Billed <= cap, billed <= counted <= cap, no row finished twice, every finished row's
    answer is one the fake served in a batch, and no answer a completed batch billed is left
    unrecorded (but a row's second one: a row billed in two completed batches, which only a
    lost submit's rows sent again while the cap paid for both may be; counted)."""
    replay = replay_journal(Path(f"{out}.ledger"))
    state = load_resume_state(out, journal_runs=replay.runs, adopted=replay.adopted, repair=False)
    assert not state.unjournaled  # every record's money is the journal's
    outcome.counted_usd = replay.spent_usd
    outcome.billed_usd = fake.ledger.total_usd
    outcome.generations = len(fake.ledger)
    problems = outcome.problems
    if outcome.billed_usd > budget:
        problems.append(f"billed ${outcome.billed_usd} over the cap ${budget}")
    if outcome.counted_usd < outcome.billed_usd:
        problems.append(f"counted ${outcome.counted_usd} under the billed ${outcome.billed_usd}")
    if outcome.counted_usd > budget:  # a line carried into a resume counted twice
        problems.append(f"counted ${outcome.counted_usd} over the cap ${budget}")
    records, finished = _finished(out, outcome, problems)
    twice = _billed_twice(fake)
    # a row billed in two completed batches: only a lost submit's rows sent again while the cap
    # paid for both (the lost one counted at its worst case): billed <= counted <= cap say it
    outcome.twice = len(twice)
    served = {e.generation_id for e in fake.ledger.entries}
    for r in finished:
        if r["status"] != "failed" and r.get("generation_id") not in served:
            problems.append(f"{r['id']}: its answer {r.get('generation_id')} was never billed")
    lost = _lost_answers(records, fake)
    if lost:
        problems.append(f"{len(lost)} billed answer(s) never recorded: {sorted(lost)[:3]}")


def _billed_twice(fake: Any) -> list[str]:
    """The custom ids billed in two completed batches."""
    billed: dict[str, int] = {}
    for batch in fake.fake.batches.batches.values():
        if batch.status == "completed" and batch.billed:
            for line in batch.lines:
                if not line.failed:
                    billed[line.custom_id] = billed.get(line.custom_id, 0) + 1
    return sorted(cid for cid, n in billed.items() if n > 1)


def _finished_records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []


def _lost_answers(records: list[dict[str, Any]], fake: Any) -> set[str]:
    """The answers completed batches billed and served that no record holds (a paid answer
    lost: the sender must fetch and record every one), but a row's second answer (a row billed
    in two completed batches, recorded with the other: its money is the journal's)."""
    recorded = {r.get("generation_id") for r in records}
    finished = {r["id"] for r in records if r["status"] in ("ok", "truncated")}
    twice = set(_billed_twice(fake))
    paid = {e.generation_id for e in fake.ledger.entries}
    served = set()
    for batch in fake.fake.batches.batches.values():
        if batch.status == "completed" and batch.billed:
            for result in batch.results or []:
                body = (result.get("response") or {}).get("body") or {}
                second = result.get("custom_id") in twice & finished
                if body.get("id") in paid and not second:
                    served.add(body["id"])
    return served - recorded


def run_batch_scenario(seed: int, tmp: Path, *, rows: int | None = None) -> Outcome:
    """A ``generate --batch`` scenario: children killed before the POST, between the POST and
    the journal's id line, or while polling; a racing run; some Batch API faults and the 402
    gate, a batch kept out of the list past the 60 s search, the server's clock minutes off
    the client's; a last resume in this process (the fake's clock moved by its sleep, credit
    added); then every batch ends (billed or not) and reruns record what they served."""
    from openrouter_probe.fake import ManualClock
    from openrouter_probe.policy import compile_policy, load_spec
    from openrouter_probe.rules import load_snapshot

    rng = random.Random(seed)
    count = rows or rng.randint(10, 60)
    _prompts(tmp / "prompts.jsonl", rng, count)
    snap = load_snapshot(BATCH_EXAMPLE / "kimi-k3.snapshot.json")
    policy = compile_policy(load_spec(BATCH_EXAMPLE / "kimi-k3.spec.yaml"), snap)
    policy_path = policy.save(tmp / "kimi-k3.yaml")
    budget = Decimal(rng.choice(["0.02", "0.05", "1"]))
    faults = ",".join(f for f in BATCH_FAULTS if rng.random() < 0.3)
    credit = rng.choice([None, None, 0.02])
    # drawn apart, so that the other draws of a seed stay what they were before: a batch kept
    # out of the list (and 404) past the sender's 60 s search, and the server's clock minutes
    # off the client's (negative: the client's is ahead)
    skew_rng = random.Random(seed + 300_000)
    if skew_rng.random() < 0.5:
        lag = f"batch_404={skew_rng.choice([0.5, 1])}/{skew_rng.choice([90, 150, 400])}"
        faults = ",".join(f for f in (faults, lag) if f)
    skew = skew_rng.choice([0, -420, -310, -180, 240, 600])
    clock = ManualClock(time.time() + skew)
    with serve(
        snap, speed=0, seed=seed, faults=faults or None, clock=clock, credit_usd=credit
    ) as fake:
        options = {
            **_options(tmp, rng, budget, fake.base_url),
            "policy": str(policy_path),
            "stream": False,
            "read_timeout_s": 300.0,
            "max_tokens": rng.choice([50, 100, 300]),
            "batch": {"size": rng.choice([4, 16, 5000])},  # BatchOptions, as JSON for a child
        }
        outcome = Outcome(seed, budget, Decimal(0), Decimal(0), 0, 0, turns="last (batch)")
        outcome.runs.append(f"faults {faults or 'none'}, server clock {skew:+d} s")

        async def moving(seconds: float) -> None:
            clock.advance(seconds)
            await asyncio.sleep(0)

        waits = {"sleep": moving, "clock": clock.now}
        # drawn apart, so that the other draws of a seed stay what they were before
        kills_rng = random.Random(seed + 200_000)
        kills = [rng.choice(["plan", "id", "poll"]) for _ in range(rng.choice([1, 2]))]
        draw = kills_rng.random()
        if draw < 0.35:  # issue 30's sequence: killed while writing, then after the move
            kills = [f"write:{kills_rng.randint(1, 5)}", "moved"]
        elif draw < 0.7:  # the new kill points alone
            kills = [
                kills_rng.choice(["write:1", "write:3", "moved", "create"])
                if kills_rng.random() < 0.6
                else kill
                for kill in kills
            ]
        for kill in kills:
            status, killed = _batch_child(
                options, tmp / "out.jsonl.ledger", kill, waits, clock=clock
            )
            outcome.kills += killed
            outcome.refused += "refused" in status
            outcome.runs.append(f"child {status}")
        fake.fake.credit.limit_usd = None  # the credit is added: the withheld results unlock
        outcome.runs.append(f"last {_in_process(options, **waits)}")
        # every batch made ends now, and bills what it bills, whether a run looks at it or not
        clock.advance(10**5)
        for batch in fake.fake.batches.batches.values():
            batch.tick(fake.fake, fake.fake.batches.batch_seconds)
        out = tmp / "out.jsonl"
        for _ in range(2):  # reruns at the same cap record what the last one left fetched
            if not _lost_answers(_finished_records(out), fake):
                break
            outcome.runs.append(f"rerun {_in_process(options, **waits)}")
        _check_batches(out, fake, budget, outcome)
    return outcome
