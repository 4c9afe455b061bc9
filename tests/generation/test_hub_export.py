"""End to end: the bundled six-dataset manifest run on the fake OpenRouter,
exported with ``--format hf`` and loaded back with ``datasets.load_dataset`` (the consumer's own
loader); ``--push-to-hub`` hands the folder to ``huggingface_hub`` (its API object injected)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.export import export
from tests._generate import POLICY, no_sleep, records
from tests.conftest import ROOT

MANIFEST = ROOT / "examples" / "datasets.yaml"
SOURCES = {  # dataset -> its file in the manifest, to check no prompt turn is marked generated
    "B3": "ultrachat_200k.jsonl", "B4": "magpie.jsonl", "B5": "gsm8k.json",
    "B6": "sharegpt.jsonl", "B7": "nemotron.jsonl", "B8": "specforge_prepared.jsonl",
}  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, list[Any]]:
    tmp = tmp_path_factory.mktemp("hub")
    out = tmp / "out.jsonl"
    with serve(speed=0, seed=5) as fake:
        summary = asyncio.run(
            generate(MANIFEST, policy=POLICY, out=out, base_url=fake.base_url, api_key="sk-fake",
                     sleep=no_sleep, budget_usd=1, max_tokens=2048, reasoning_effort="high")
        )  # fmt: skip
        billed = list(fake.ledger.entries)
    return out, summary, billed


def test_the_manifest_runs_every_dataset_on_the_fake(run: tuple[Path, Any, list[Any]]) -> None:
    out, summary, billed = run
    assert summary.stop_reason == "done" and summary.ok == 18
    assert summary.requests == len(billed) == 20  # B6's two multi-turn rows: two turns each
    by_id = {r["id"]: r for r in records(out)}
    assert sorted({r["dataset"] for r in by_id.values()}) == sorted(SOURCES)
    b3 = [r for r in by_id.values() if r["dataset"] == "B3"]
    assert all(r["original"]["content"].startswith("(UltraChat's own answer") for r in b3)
    assert all(r["messages"][-1]["role"] == "user" for r in b3)  # the answer was not sent


def test_export_hf_loads_with_datasets_and_the_card_says_where_it_came_from(
    run: tuple[Path, Any, list[Any]], tmp_path: Path
) -> None:
    datasets = pytest.importorskip("datasets")
    out, summary, billed = run
    folder = tmp_path / "hub"
    result = export([out], fmt="hf", output=folder, command="openrouter-probe export ...")
    assert result.written == 18
    cache = str(tmp_path / "cache")
    rows = datasets.load_dataset(str(folder), split="train", cache_dir=cache)
    assert len(rows) == 18 and sorted(set(rows["dataset"])) == sorted(SOURCES)
    b6 = datasets.load_dataset(str(folder), "B6", split="train", cache_dir=cache)
    assert len(b6) == 3 and set(b6["dataset"]) == {"B6"}
    prompts_text = {
        name: (MANIFEST.parent / "datasets" / file).read_text(encoding="utf-8")
        for name, file in SOURCES.items()
    }
    for row in rows:
        source = prompts_text[row["dataset"]]
        for turn in row["conversations"]:
            text = json.dumps(turn["content"], ensure_ascii=False)[1:-1]
            if turn["generated"]:  # the model's: never a turn of the prompts
                assert turn["role"] == "assistant" and text not in source
            else:  # a turn of the prompts, and never an answer (those were all regenerated)
                assert turn["role"] in ("system", "user") and text in source
        assert row["conversations"][-1]["generated"] is True
    b6_turns = [t for r in b6 for t in r["conversations"] if t["role"] == "assistant"]
    assert all(t["generated"] for t in b6_turns)  # --turns all: every answer is the model's
    card = (folder / "README.md").read_text(encoding="utf-8")
    header = yaml.safe_load(card.split("---")[1])
    assert [c["config_name"] for c in header["configs"]] == ["default", *sorted(SOURCES)]
    provenance = yaml.safe_load(card.split("```yaml")[1].split("```")[0])["provenance"]
    assert provenance["model"] == "moonshotai/kimi-k2.5"
    assert provenance["served_models"] == sorted({r["model"] for r in records(out)})
    assert provenance["policy"] == str(POLICY)
    assert provenance["policy_sha256"][0].startswith("sha256:")
    assert provenance["snapshot"]["sha256"].startswith("sha256:a647eec5")
    assert provenance["snapshot"]["taken_at"] == "2026-02-01T00:00:00Z"
    served = {e.provider for e in billed}
    assert set(provenance["providers"]) == served
    assert abs(sum(provenance["providers"].values()) - 1) < 1e-3
    assert provenance["spent_usd"] == pytest.approx(float(sum(e.cost_usd for e in billed)))
    assert provenance["prompts"] == [str(MANIFEST)]
    assert provenance["prompts_skipped"] == summary.rows_skipped == 0
    assert provenance["command"] == "openrouter-probe export ..."


class _Api:
    """Stands for ``huggingface_hub.HfApi``: records the calls the export makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def create_repo(self, repo_id: str, **kw: Any) -> None:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kw}))

    def upload_folder(self, **kw: Any) -> Any:
        self.calls.append(("upload_folder", kw))
        files = sorted(p.relative_to(kw["folder_path"]).as_posix()
                       for p in Path(kw["folder_path"]).rglob("*") if p.is_file())  # fmt: skip
        self.calls.append(("files", {"files": files}))
        return type("Info", (), {"commit_url": "https://huggingface.co/datasets/me/x/commit/1"})


def test_push_to_hub_hands_the_folder_to_huggingface_hub(
    run: tuple[Path, Any, list[Any]], tmp_path: Path
) -> None:
    pytest.importorskip("pyarrow")
    api = _Api()
    folder = tmp_path / "hub"
    summary = export([run[0]], fmt="hf", output=folder, push_to_hub="me/x", hub_api=api)
    (name, create), (_, upload), (_, listed) = api.calls
    assert name == "create_repo" and create == {
        "repo_id": "me/x", "repo_type": "dataset", "private": True, "exist_ok": True,
    }  # fmt: skip
    assert upload["folder_path"] == str(folder) and upload["repo_type"] == "dataset"
    assert "README.md" in listed["files"]
    (b3,) = [f for f in listed["files"] if f.startswith("data/B3/")]
    assert re.fullmatch(r"data/B3/train-00000-of-00001-[0-9a-f]{16}\.parquet", b3)
    assert upload["delete_patterns"] == ["data/**"]  # an earlier export's shards go
    assert "pushed to the Hub: https://huggingface.co/datasets/me/x/commit/1" in summary.render()


def test_without_pyarrow_format_hf_says_what_to_install(
    run: tuple[Path, Any, list[Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ConfigError) as info:
        export([run[0]], fmt="hf", output=tmp_path / "hub")
    assert str(info.value) == "fmt='hf' needs pyarrow: pip install 'openrouter-probe[hf]'"
    assert not (tmp_path / "hub").exists()


def test_the_cli_exports_hf_into_a_folder(run: tuple[Path, Any, list[Any]], tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    folder = tmp_path / "hub"
    result = CliRunner().invoke(cli, ["export", str(run[0]), "--format", "hf", "-o", str(folder)])
    assert result.exit_code == 0, result.output
    assert f"wrote 18 of 18 rows to {folder} (hf)" in result.stderr
    assert sorted(p.name for p in (folder / "data").iterdir()) == sorted(SOURCES)
    again = CliRunner().invoke(cli, ["export", str(run[0]), "--format", "hf", "-o", str(folder)])
    assert again.exit_code == 0  # an export replaces the folder it wrote
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    refused = CliRunner().invoke(
        cli, ["export", str(run[0]), "--format", "hf", "-o", str(tmp_path / "mine")]
    )
    assert refused.exit_code == 1 and "holds files and no dataset card" in refused.stderr
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


_REEXPORT = """
import json, sys
from pathlib import Path
import datasets
from click.testing import CliRunner
from openrouter_probe.cli import cli

tmp = Path(sys.argv[1])
counts = []
for n in (3, 5, 3):
    out = tmp / f"out{n}.jsonl"
    out.write_text("".join(json.dumps({
        "id": f"r{i}", "dataset": "d", "status": "ok", "content": f"answer {i} of {n}",
        "messages": [{"role": "user", "content": f"question {i}"}], "provider": "Chutes",
        "model": "m", "finish_reason": "stop", "usage": {"completion_tokens": 3}}) + "\\n"
        for i in range(n)))
    result = CliRunner().invoke(cli, ["export", str(out), "--format", "hf", "-o",
                                      str(tmp / "hub" / "drafter-data")])
    assert result.exit_code == 0, result.output
    rows = datasets.load_dataset(str(tmp / "hub" / "drafter-data"), split="train")
    counts.append([len(rows), rows[0]["conversations"][-1]["content"]])
print(json.dumps(counts))
"""


def test_a_re_export_into_the_same_folder_loads_its_own_rows_with_the_default_cache(
    tmp_path: Path,
) -> None:
    """Issue 32 item 6: datasets keys its cache of a local folder on the card's data files; the
    shards' names carry their hash, so each export is read back, not the first one's cache. The
    folder's parent (``hub/``) does not exist before: ``-o`` makes it."""
    import os
    import subprocess

    pytest.importorskip("datasets")
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}  # fmt: skip
    env.pop("HF_DATASETS_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-c", _REEXPORT, str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [
        [3, "answer 0 of 3"],
        [5, "answer 0 of 5"],
        [3, "answer 0 of 3"],
    ]
    assert (tmp_path / "hf-home" / "datasets").is_dir()  # the default cache, under HF_HOME


@pytest.mark.parametrize(
    "text", [None, "provenance: [unclosed\n", "- a list\n", "provenance:\n  model: m\n"]
)
def test_the_card_reads_the_compiled_policy_and_says_less_when_it_cannot(
    tmp_path: Path, text: str | None
) -> None:
    """The card's model and snapshot come from the compiled policy the journal names, read by
    ``policy``'s own reader; a policy since gone, broken, or not compiled leaves them empty."""
    from openrouter_probe.generation.hub import HubCard, _policy_facts

    card = HubCard(policy=str(POLICY))
    _policy_facts(card, [])
    assert card.model == "moonshotai/kimi-k2.5"
    assert card.snapshot == {
        "sha256": "sha256:a647eec58c5be5b20e0e74bc2d3bf475906df76d52665ef33feeffc22a24502c",
        "taken_at": "2026-02-01T00:00:00Z",
        "source": "bundled",
    }
    policy = tmp_path / "policy.yaml"
    if text is not None:
        policy.write_text(text, encoding="utf-8")
    card = HubCard(policy=str(policy))
    _policy_facts(card, [])
    assert (card.model, card.snapshot) == (None, {})
