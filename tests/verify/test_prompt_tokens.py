"""Prompt-token agreement and the fake's template fault: an endpoint that
counts N more prompt tokens for the same body is named for it in the report and the JSON, whatever
its accuracy; an endpoint whose counts match is not; the fake bills the extra tokens."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

import openrouter_probe as orp
from openrouter_probe.api.batches import BatchClient
from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import ManualClock
from openrouter_probe.fake.app import FakeOpenRouter
from openrouter_probe.fake.batches import FINALIZING_S, VALIDATING_S
from openrouter_probe.fake.billing import unit_prices
from openrouter_probe.rules.prompt_tokens import estimate_prompt_tokens
from openrouter_probe.rules.snapshot import bundled_snapshot, load_snapshot
from openrouter_probe.verify.observation import Observation
from openrouter_probe.verify.pins import pin_block
from openrouter_probe.verify.prompt_tokens import prompt_token_agreement
from tests.conftest import ROOT

MODEL = "moonshotai/kimi-k2.5"
SNAP = bundled_snapshot(MODEL)
INT4 = [e.tag for e in SNAP.endpoints if e.quantization == "int4" and e.slug != "moonshotai"]
BY_TAG = {e.tag: e for e in SNAP.endpoints}


def _run(counts: dict[str, int | None], *, failed: tuple[str, ...] = ()) -> dict[str, Observation]:
    return {
        i: Observation("x", i, prompt_tokens=n or 0, error="boom" if i in failed else None)
        for i, n in counts.items()
    }


REF = _run({f"q{i}": 40 + i for i in range(10)})


def test_a_constant_surplus_is_systematic_and_named_with_its_sign() -> None:
    plus = prompt_token_agreement(_run({i: o.prompt_tokens + 12 for i, o in REF.items()}), REF)
    assert (plus.pairs, plus.differing, plus.higher, plus.lower) == (10, 10, 10, 0)
    assert plus.differ_rate == 1.0 and plus.median_difference == 12
    assert plus.systematic
    assert plus.finding == (
        "renders a different template: +12 tokens per request (median; 10 of 10 identical "
        "requests counted differently from the reference)"
    )
    minus = prompt_token_agreement(_run({i: o.prompt_tokens - 3 for i, o in REF.items()}), REF)
    assert minus.lower == 10 and minus.finding is not None
    assert minus.finding.startswith("renders a different template: -3 tokens per request")


def test_matching_mixed_or_rare_differences_are_not_a_finding() -> None:
    same = prompt_token_agreement(_run({i: o.prompt_tokens for i, o in REF.items()}), REF)
    assert (same.pairs, same.differing, same.median_difference) == (10, 0, None)
    assert not same.systematic and same.finding is None
    # every count differs, but half up and half down: no template renders that
    mixed = _run(
        {i: o.prompt_tokens + (5 if k % 2 else -5) for k, (i, o) in enumerate(REF.items())}
    )
    assert not prompt_token_agreement(mixed, REF).systematic
    # 4 of 10 differ, all by +2: less than half the requests
    rare = _run({i: o.prompt_tokens + (2 if k < 4 else 0) for k, (i, o) in enumerate(REF.items())})
    found = prompt_token_agreement(rare, REF)
    assert (found.differing, found.median_difference, found.systematic) == (4, 2, False)
    # too few pairs to call anything
    few = {i: REF[i] for i in ("q0", "q1", "q2", "q3")}
    assert not prompt_token_agreement(
        _run({i: o.prompt_tokens + 9 for i, o in few.items()}), few
    ).systematic


def test_unknown_counts_are_left_out_not_read_as_agreement() -> None:
    counts: dict[str, int | None] = {i: o.prompt_tokens + 7 for i, o in REF.items()}
    counts["q0"] = None  # usage without prompt_tokens
    got = prompt_token_agreement(_run(counts, failed=("q1",)), REF)
    assert (got.pairs, got.differing, got.unreported) == (8, 8, 2)


def test_a_reference_that_differs_from_itself_as_often_is_no_finding() -> None:
    shifted = _run({i: o.prompt_tokens + 4 for i, o in REF.items()})
    # the reference's own second run counts +4 on every request too: the floor explains it
    got = prompt_token_agreement(shifted, REF, floor=shifted)
    assert (got.floor_pairs, got.floor_differing, got.floor_rate) == (10, 10, 1.0)
    assert not got.systematic


def _ask(base_url: str, tag: str) -> dict[str, Any]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is 37 * 41? Answer with the number."}],
        "provider": pin_block(tag),
        "max_tokens": 64,
    }
    answer = requests.post(
        f"{base_url}/chat/completions",
        json=body,
        headers={"Authorization": "Bearer sk-fake"},
        timeout=30,
    )
    answer.raise_for_status()
    return answer.json()


def test_the_fake_counts_and_bills_the_extra_template_tokens() -> None:
    counted = estimate_prompt_tokens(
        [{"role": "user", "content": "What is 37 * 41? Answer with the number."}]
    )
    with orp.fake.serve(SNAP, speed=0, seed=3) as plain:
        before = {t: _ask(plain.base_url, t) for t in ("chutes/int4", "parasail/int4")}
    with orp.fake.serve(SNAP, speed=0, seed=3, degrade_template=["chutes/int4=12"]) as fake:
        after = {t: _ask(fake.base_url, t) for t in ("chutes/int4", "parasail/int4")}
        entries = {e.tag: e for e in fake.ledger.entries}
    assert before["chutes/int4"]["usage"]["prompt_tokens"] == counted
    assert after["chutes/int4"]["usage"]["prompt_tokens"] == counted + 12
    assert after["parasail/int4"]["usage"] == before["parasail/int4"]["usage"]  # untouched
    assert entries["chutes/int4"].prompt_tokens == counted + 12
    # the same answer, billed 12 more prompt tokens at chutes' prompt price
    assert after["chutes/int4"]["choices"] == before["chutes/int4"]["choices"]
    extra = Decimal(str(after["chutes/int4"]["usage"]["cost"])) - Decimal(
        str(before["chutes/int4"]["usage"]["cost"])
    )
    price = unit_prices(BY_TAG["chutes/int4"].pricing).prompt
    assert abs(extra - 12 * price) < Decimal("1e-9")


def test_the_fake_refuses_a_bad_template_option() -> None:
    with pytest.raises(ConfigError, match=r"degrade_template nobody=3: no endpoint matches"):
        FakeOpenRouter(SNAP, degrade_template=["nobody=3"])
    with pytest.raises(ConfigError, match="chutes=many: N must be a whole number"):
        FakeOpenRouter(SNAP, degrade_template={"chutes": "many"})  # type: ignore[dict-item]
    result = CliRunner().invoke(cli, ["fake-server", "--offline", "--degrade-template", "chutes"])
    assert result.exit_code == 2
    assert "--degrade-template 'chutes': expected TAG=N" in result.output


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_verify_names_the_endpoint_with_another_template_and_no_other(
    seed: int, tmp_path: Path
) -> None:
    args = ["verify", MODEL, "--endpoints", ",".join(INT4), "--n", "40", "--seed", str(seed)]
    args += ["--budget-usd", "1", "--quiet"]
    with orp.fake.serve(
        SNAP, speed=0, seed=seed, noise=0.02, degrade_template={"chutes/int4": 12}
    ) as fake:
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
        table = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "t.jsonl")], env=env)
        args += ["--out", str(tmp_path / "j.jsonl"), "--format", "json"]
        shown = CliRunner().invoke(cli, args, env=env)
    assert table.exit_code == 0, table.output
    assert shown.exit_code == 0, shown.output
    finding = (
        "chutes/int4: renders a different template: +12 tokens per request (median; 40 of 40 "
        "identical requests counted differently from the reference)"
    )
    assert finding in " ".join(table.stdout.split())  # wrapped at 80 columns
    assert table.stdout.count("renders a different template") == 1  # and no other endpoint
    rows = {r["tag"]: r for r in json.loads(shown.stdout)}
    chutes = rows.pop("chutes/int4")
    assert chutes["findings"] == [finding.removeprefix("chutes/int4: ")]
    assert (chutes["prompt_tokens_pairs"], chutes["prompt_tokens_differ_rate"]) == (40, 1.0)
    assert (chutes["prompt_tokens_diff_median"], chutes["prompt_tokens_higher"]) == (12, 40)
    assert chutes["prompt_tokens_systematic"] is True
    # the native endpoints (the reference among them) count as the reference does, and the
    # reference's second run as its first
    assert set(rows) == {*INT4, "moonshotai/int4"} - {"chutes/int4"}
    for tag, row in rows.items():
        assert row["findings"] == [], tag
        assert (row["prompt_tokens_differ_rate"], row["prompt_tokens_systematic"]) == (0.0, False)
    assert rows["moonshotai/int4"]["prompt_tokens_floor_differ_rate"] == 0.0


def test_a_batch_on_that_endpoint_counts_and_bills_them_too() -> None:
    k3 = load_snapshot(ROOT / "examples" / "batch" / "kimi-k3.snapshot.json")
    lines = [
        {
            "custom_id": f"row-{i}",
            "body": {"messages": [{"role": "user", "content": f"{i} + {i}?"}]},
        }
        for i in range(1, 3)
    ]
    clock = ManualClock(1_790_000_000)
    with (
        orp.fake.serve(
            k3, speed=0, clock=clock, batch_seconds=60, degrade_template=["together=9"]
        ) as fake,
        BatchClient(api_key="sk-fake", base_url=fake.base_url) as client,
    ):
        job = client.create(
            model="moonshotai/kimi-k3",
            requests=lines,
            provider={"only": ["together"], "allow_fallbacks": False},
        )
        clock.advance(VALIDATING_S + 60 + FINALIZING_S)
        assert client.get(job.id).status == "completed"
        entries = fake.ledger.entries
    counted = {estimate_prompt_tokens(line["body"]["messages"], line["body"]) for line in lines}
    assert {e.prompt_tokens for e in entries} == {n + 9 for n in counted}
    for e in entries:  # billed at the :batch price, the extra tokens included
        assert e.cost_usd == Decimal("0.0000015") * e.prompt_tokens + Decimal("0.0000075") * (
            e.completion_tokens
        )
