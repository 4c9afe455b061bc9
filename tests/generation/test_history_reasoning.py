"""Reasoning across turns (``--turns all``): each model says whether its earlier turns' reasoning
goes back in the history (Kimi K2.5: its chat template drops it, so it is not sent), the run
follows it, and each kept turn (and the ``jsonl`` export) says whether later requests carried it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from openrouter_probe.generation import generate
from openrouter_probe.generation.export import export
from openrouter_probe.rules.sampling import history_reasoning
from openrouter_probe.run.books.turns import TurnBook
from openrouter_probe.run.rows import PromptRow
from tests._generate import POLICY, LedgerSender, no_sleep, records, write_prompts

MESSAGES = [
    {"role": "user", "content": "question 1 first"},
    {"role": "assistant", "content": "the prompt file's answer"},
    {"role": "user", "content": "question 1 again"},
]
DETAILS = [{"type": "reasoning.encrypted", "data": "b64", "index": 0}]


def test_the_registry_says_k25_drops_it_and_an_unknown_model_is_not_sent_it() -> None:
    back, why = history_reasoning("moonshotai/kimi-k2.5:exacto")
    assert back is False and "hist_msgs" in why
    back, why = history_reasoning("someone/else")
    assert back is False and "not known for this model" in why


def test_a_model_that_reads_it_gets_each_earlier_turn_with_its_reasoning(tmp_path: Path) -> None:
    row = PromptRow("r", "d", MESSAGES, {}, 1)
    kept = {
        "r": [{"index": 1, "content": "mine", "reasoning": "why", "reasoning_details": DETAILS}]
    }
    back = TurnBook.start(tmp_path / "a.jsonl", [row], kept, reasoning_back=True)
    assert back.requests([row])[0].messages[1] == {
        "role": "assistant", "content": "mine", "reasoning": "why", "reasoning_details": DETAILS
    }  # fmt: skip
    dropped = TurnBook.start(tmp_path / "b.jsonl", [row], kept)
    assert dropped.requests([row])[0].messages[1] == {"role": "assistant", "content": "mine"}


def test_k25_turns_go_back_without_reasoning_and_the_export_says_so(tmp_path: Path) -> None:
    write_prompts(tmp_path / "p.jsonl", [{"id": "r1", "messages": MESSAGES}])
    sender = LedgerSender(seed=1)
    out = tmp_path / "out.jsonl"
    summary = asyncio.run(
        generate(tmp_path / "p.jsonl", policy=POLICY, out=out, snapshot="bundled", send=sender,
                 sleep=no_sleep, budget_usd=1, max_tokens=2000, turns="all")
    )  # fmt: skip
    assert summary.ok + summary.truncated == 1 and len(sender.bodies) == 2
    second = json.loads(sender.bodies[1])
    assert second["messages"][1] == {"role": "assistant", "content": "answer 1"}
    assert any(
        "earlier turns' reasoning is not sent back" in n and "hist_msgs" in n for n in summary.notes
    )
    (record,) = records(out)
    first, last = record["turns"]
    assert first["reasoning"] == "thinking" and first["reasoning_in_history"] is False
    assert "reasoning_in_history" not in last  # no request came after it
    export([out], fmt="jsonl", output=tmp_path / "t.jsonl", include_truncated=True)
    (row,) = records(tmp_path / "t.jsonl")
    assert row["turns"][0]["reasoning_in_history"] is False
