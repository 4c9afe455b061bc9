"""datatrove on Ray: ``GenerateStep`` under ``RayPipelineExecutor`` on a local Ray cluster, a key a
rank, on the fake (slow; skipped where ray is not installed: it is no extra of this package).

The example (``examples/scale-out/datatrove_pipeline.py --executor ray``) runs as a user runs it, in
its own process, which starts the local cluster (``ray.init``); the Ray workers it starts inherit
its environment (the fake's address, the management key) and reach the fake over loopback.
"""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from openrouter_probe.api.keys import KeysClient
from openrouter_probe.fake import serve
from openrouter_probe.generation.books import expand_outputs, job_books
from openrouter_probe.generation.keyfile import create_shard_keys, read_key_file
from tests._generate import POLICY, prompt_rows, records, write_prompts
from tests.generation.test_datatrove_step import EXAMPLE, MANAGER, _env

pytestmark = pytest.mark.slow


def test_ranks_on_ray_stopped_by_their_key_limits_finish_on_a_rerun(tmp_path: Path) -> None:
    """Every rank's key too small: on Ray each rank runs until its key's limit stops it (a
    task's error ends no other task), raises, and stays incomplete; the example says which
    and why and exits 1. With the limits raised, the rerun answers every row once, nothing is
    paid twice and each key's usage is its rank's journals."""
    pytest.importorskip("ray")
    pytest.importorskip("datatrove")
    rows = prompt_rows(200)
    write_prompts(tmp_path / "prompts.jsonl", rows)
    out = tmp_path / "out"
    with serve(speed=0, seed=21, management_key=MANAGER) as fake:
        keys = KeysClient(management_key=MANAGER, base_url=fake.base_url)
        made = create_shard_keys(
            "ray", shards=4, budget_usd="0.008", out=tmp_path / "keys.json", client=keys
        )
        command = [
            sys.executable, str(EXAMPLE), str(tmp_path / "prompts.jsonl"), str(out),
            "--executor", "ray", "--ray-cpus", "2", "--tasks", "4", "--policy", str(POLICY),
            "--budget-usd", "2", "--key-file", str(tmp_path / "keys.json"),
            "--max-tokens", "300", "--concurrency", "4", "--snapshot", "bundled",
        ]  # fmt: skip
        env = {**_env(fake.base_url), "RAY_ADDRESS": "", "RAY_USAGE_STATS_ENABLED": "0"}
        first = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert first.returncode == 1, first.stderr[-4000:]
        said = [x for x in first.stderr.splitlines() if x.startswith("datatrove_pipeline: ")]
        completions = out / "logs" / "completions"
        done = sorted(p.name for p in completions.iterdir()) if completions.exists() else []
        # no pool ends the others: every rank ran until its own key stopped it
        assert done == [] and len(said) == 4, first.stderr[-4000:]
        for rank, line in enumerate(said):
            assert line.startswith(f"datatrove_pipeline: rank {rank} incomplete: rank {rank}/4 ")
            assert f"ended short of its rows (key-limit: shard {rank}/4's key" in line
            assert "raise the key's limit" in line and "rerun the same pipeline" in line
        billed = fake.ledger.total_usd
        assert 0 < billed <= Decimal("0.008")
        answered = {r["id"] for o in expand_outputs([out]) for r in records(o)
                    if r["status"] in ("ok", "truncated")}  # fmt: skip
        assert 0 < len(answered) < 200
        for key in made.keys:  # an unfinished rank keeps its key for the rerun: raise it
            assert not keys.get(key.hash).disabled
            keys.update(key.hash, limit=1)
        again = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert again.returncode == 0, again.stderr[-4000:]
        assert sorted(p.name for p in completions.iterdir()) == [f"{i:05d}" for i in range(4)]
        served = [r for o in expand_outputs([out]) for r in records(o)
                  if r["status"] in ("ok", "truncated")]  # fmt: skip
        assert sorted(r["id"] for r in served) == sorted(r["id"] for r in rows)  # each once
        assert answered <= {r["id"] for r in served}
        assert len(fake.ledger) == 200  # one billed generation a row: nothing paid twice
        books = job_books(read_key_file(tmp_path / "keys.json"), [out], client=keys)
        assert books.keys_usage_usd == fake.ledger.total_usd == books.journals_usd
        assert books.live == []  # each rank completed and disabled its key
        for line in books.keys:  # each key checked against its own rank's journals
            assert line.usage_usd is not None and line.usage_usd == line.journals_usd
        keys.close()
