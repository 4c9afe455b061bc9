"""The senders a run may send through (``run.senders.SENDERS``): chosen by the options, the
batch sender first, then a caller's, then HTTP."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path

from openrouter_probe.run.config import Learned, RunPlan
from openrouter_probe.run.money.spend import Prices
from openrouter_probe.run.send.batch_plan import BatchSettings
from openrouter_probe.run.senders import SENDERS, sender_for


async def _never(body: bytes, **_: object) -> object:
    raise AssertionError("not sent")


def test_the_options_choose_the_sender(tmp_path: Path) -> None:
    assert [kind.name for kind in SENDERS] == ["batch", "given", "http"]
    options = RunPlan(command="generate", out=tmp_path / "out.jsonl")
    sync = Learned.nothing(options)
    assert sender_for(options, sync).name == "http"
    given = dataclasses.replace(options, send=_never)  # type: ignore[arg-type]
    assert sender_for(given, sync).name == "given"
    settings = BatchSettings(
        model="m/x", provider={"only": ["a/int4"]}, prices=Prices(Decimal(1), Decimal(1))
    )
    assert sender_for(given, Learned(cap_usd=None, batch=settings)).name == "batch"
