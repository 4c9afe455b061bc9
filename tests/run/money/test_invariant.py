"""The money invariant, randomized: after every scenario of ``tests/_invariant.py``, what
the fake billed <= the cap, what the client counts >= what the fake billed, no row bought twice.

Seeded: each seed is one scenario (every fault kind of the fake at random rates, streaming or not,
two child processes killed with SIGKILL at random points, a second run racing each for the output,
a last resume; ``--turns last`` or ``all`` with multi-turn rows; rows with a web search server
tool; BYOK answers). CI runs ``SEEDS``; ``python scripts/soak_invariant.py`` runs hundreds.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from tests._invariant import run_batch_scenario, run_scenario

SEEDS = range(16)


@pytest.mark.slow
def test_the_money_invariant_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = []
    for seed in SEEDS:
        folder = tmp_path / f"seed-{seed}"
        folder.mkdir()
        outcome = run_scenario(seed, folder)
        assert outcome.problems == [], outcome.line()
        assert outcome.billed_usd <= outcome.budget_usd
        assert outcome.counted_usd >= outcome.billed_usd
        outcomes.append(outcome)
    # the seeds do what the invariant is about: kills, refused races, a cap that binds. A
    # child kills itself at its own point (tests._child: the N-th request back), early enough
    # that every first run gets there; a resume whose cap is spent sends nothing to die at
    assert sum(o.kills for o in outcomes) >= len(SEEDS) // 3
    assert sum(o.refused for o in outcomes) >= 1
    assert any(o.billed_usd > o.budget_usd / 2 for o in outcomes)
    # --turns all: rows regenerated turn by turn, killed mid-row with turns kept for the resume
    assert any(o.turns == "all" and o.kills and o.kept_turns for o in outcomes)
    # rows with a web search server tool (its fee and results in the bill), BYOK answers
    assert any(o.searched for o in outcomes) and any(o.byok for o in outcomes)
    with capsys.disabled():
        print("\n" + "\n".join(o.line() for o in outcomes))


BATCH_SEEDS = range(6)


@pytest.mark.slow
def test_the_money_invariant_holds_in_batch_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``generate --batch``: children killed before the POST, between it and the id line, while
    polling; a racing run; Batch API faults and the 402 gate; a last resume."""
    outcomes = []
    for seed in BATCH_SEEDS:
        folder = tmp_path / f"batch-seed-{seed}"
        folder.mkdir()
        outcome = run_batch_scenario(seed, folder)
        assert outcome.problems == [], outcome.line()
        assert outcome.billed_usd <= outcome.budget_usd
        assert outcome.counted_usd >= outcome.billed_usd
        outcomes.append(outcome)
    assert sum(o.kills for o in outcomes) >= len(BATCH_SEEDS) // 2
    assert sum(o.refused for o in outcomes) >= 1
    assert any(o.finished for o in outcomes)
    with capsys.disabled():
        print("\n" + "\n".join(o.line() for o in outcomes))


def test_a_lost_submit_is_found_whatever_the_clocks_did_since_its_plan(tmp_path: Path) -> None:
    """The batch soak's seed 3062: a child killed right after its first POST made a batch (the
    answer lost), the server's clock 310 s behind the client's, then the fake's clock moved a
    day on while the client's did not. The orphan search took the skew it read then (a day
    ahead) for the skew at the plan and skipped the batch, created "before" the plan: 7-14
    billed answers were never recorded, every rerun stopped `budget`. The window now reaches
    ``SKEW_MARGIN_S`` further back; the match is by the batch's content."""
    outcome = run_batch_scenario(3062, tmp_path)
    assert "server clock -310 s" in outcome.runs[0] and "killed at create" in outcome.runs[1]
    assert outcome.problems == [], outcome.line()
    assert outcome.billed_usd <= outcome.budget_usd <= Decimal("0.05")
    assert outcome.counted_usd >= outcome.billed_usd
