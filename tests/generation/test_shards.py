"""``shard="auto"`` (``--shard auto``): the rank and world size from the launcher's variables."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.generation import generate
from openrouter_probe.generation.shards import LAUNCHER_VARIABLES, shard_from_launcher
from tests._generate import POLICY, LedgerSender, prompt_rows, records, write_prompts

LAUNCHERS = {
    "slurm-array": ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"),
    "slurm-step": ("SLURM_PROCID", "SLURM_NTASKS"),
    "torchrun": ("RANK", "WORLD_SIZE"),
}


@pytest.fixture(autouse=True)
def _no_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    for pair in LAUNCHER_VARIABLES:
        for name in pair:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SLURM_ARRAY_TASK_MIN", raising=False)


async def _no_sleep(_: float) -> None:
    return None


@pytest.mark.parametrize("launcher", ["slurm-array", "torchrun"])
def test_auto_shards_are_disjoint_and_cover_every_row(
    launcher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rank_name, size_name = LAUNCHERS[launcher]
    prompts = write_prompts(tmp_path / "prompts.jsonl", prompt_rows(40))
    per_shard: list[list[str]] = []
    for rank in range(4):
        monkeypatch.setenv(rank_name, str(rank))
        monkeypatch.setenv(size_name, "4")
        out = tmp_path / f"{launcher}-{rank}.jsonl"
        sender = LedgerSender(seed=rank)
        asyncio.run(
            generate(prompts, policy=POLICY, out=out, send=sender, snapshot="bundled",
                     sleep=_no_sleep, max_tokens=16, shard="auto")
        )  # fmt: skip
        ids = [r["id"] for r in records(out)]
        assert sorted(ids) == sorted(f"r{row}" for row, _, _ in sender.ledger)  # sent = recorded
        per_shard.append(ids)
    every = [row for ids in per_shard for row in ids]
    assert len(every) == len(set(every)) == 40  # disjoint
    assert set(every) == {f"r{i}" for i in range(40)}  # the union is every row
    assert all(per_shard)  # 40 rows over 4 shards: each gets some


def test_launcher_variables_in_order_and_their_errors() -> None:
    both = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3", "RANK": "0",
            "WORLD_SIZE": "8"}  # fmt: skip
    got = shard_from_launcher(both)
    assert (got.pair, got.source) == ((1, 3), "SLURM_ARRAY_TASK_ID=1, SLURM_ARRAY_TASK_COUNT=3")
    assert shard_from_launcher({"SLURM_PROCID": "2", "SLURM_NTASKS": "4"}).pair == (2, 4)
    # --array=5-8: ids from SLURM_ARRAY_TASK_MIN on
    shifted = {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_COUNT": "4",
               "SLURM_ARRAY_TASK_MIN": "5"}  # fmt: skip
    assert shard_from_launcher(shifted).pair == (2, 4)
    with pytest.raises(ConfigError, match="RANK is set but WORLD_SIZE is not"):
        shard_from_launcher({"RANK": "1"})
    with pytest.raises(ConfigError, match="RANK=4, WORLD_SIZE=4 needs 0 <= rank < world size"):
        shard_from_launcher({"RANK": "4", "WORLD_SIZE": "4"})
    with pytest.raises(ConfigError, match="WORLD_SIZE='four' is not a whole number"):
        shard_from_launcher({"RANK": "0", "WORLD_SIZE": "four"})
    with pytest.raises(ConfigError, match="no launcher variables found"):
        shard_from_launcher({})


def test_cli_dry_run_says_the_launcher_and_none_exits_2(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", prompt_rows(12))
    args = ["generate", str(prompts), "--policy", str(POLICY), "-o", str(tmp_path / "o.jsonl"),
            "--snapshot", "bundled", "--budget-usd", "0.5", "--shard", "auto", "--dry-run"]  # fmt: skip
    env = {"OPENROUTER_API_KEY": "", "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3"}
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 0, result.output
    assert (
        "shard 1/3 from the launcher (SLURM_ARRAY_TASK_ID=1, SLURM_ARRAY_TASK_COUNT=3)"
        in result.output
    )
    assert "$0.50 x 3 shards = $1.50" in result.output
    assert not (tmp_path / "o.jsonl").exists()
    none = CliRunner().invoke(cli, args, env={"OPENROUTER_API_KEY": ""})
    assert none.exit_code == 2, none.output
    assert "--shard auto: no launcher variables found" in none.stderr
    assert "Traceback" not in none.output
