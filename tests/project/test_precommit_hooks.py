"""The pre-commit hooks for repositories that check a policy in (``.pre-commit-hooks.yaml``).

The hook logic (``openrouter_probe.cli.hooks``) is tested in process on copies of the DeepSeek V3.2
example; ``test_hooks_under_pre_commit_try_repo`` runs both hooks the way a user's repository does,
through ``pre-commit try-repo``: it installs this package into a fresh virtualenv from the package
index (about 20 s with pre-commit-uv from the dev extra, 2-3 minutes with plain pip on a loaded
2-core machine); deselect it with ``-m "not precommit"``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from openrouter_probe.cli.hooks import hooks
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "policies"
NAME = "deepseek-v3.2"


def _policies(tmp_path: Path) -> Path:
    """A repository-like folder holding the example spec, its snapshot and its compiled file."""
    folder = tmp_path / "policies"
    folder.mkdir()
    for suffix in (".spec.yaml", ".snapshot.json", ".yaml"):
        shutil.copy(EXAMPLE / f"{NAME}{suffix}", folder / f"{NAME}{suffix}")
    return folder


def _run(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(hooks, [str(a) for a in args])
    return result.exit_code, result.output


def _loosen_price_cap(spec: Path) -> None:
    text = spec.read_text()
    assert "output_usd_per_m: 0.60" in text
    spec.write_text(text.replace("output_usd_per_m: 0.60", "output_usd_per_m: 0.90"))


def test_fresh_policy_passes_from_any_file_of_the_pair(tmp_path: Path) -> None:
    folder = _policies(tmp_path)
    for suffix in (".spec.yaml", ".yaml", ".snapshot.json"):
        assert _run("compile", folder / f"{NAME}{suffix}") == (0, "")


#: What loosening the price cap changes, as the hook prints it under the stale file (issue 18).
DIFF = (
    '  a re-compile sets provider.max_price to {"completion": "0.9"} (now {"completion": "0.6"})\n'
    "  a re-compile sets provider.order to novita/fp8, atlas-cloud/fp8, deepseek, siliconflow/fp8, "
    "parasail/bf16 (now atlas-cloud/fp8, novita/fp8, deepseek, siliconflow/fp8)\n"
    "  a re-compile admits parasail/bf16 (Parasail, bf16 upcast, $0.50/M in, $0.85/M out)\n"
)


def test_stale_compiled_file_is_rewritten_and_fails(tmp_path: Path) -> None:
    folder = _policies(tmp_path)
    _loosen_price_cap(folder / f"{NAME}.spec.yaml")
    code, out = _run("compile", folder / f"{NAME}.spec.yaml")
    assert code == 1
    assert out == (
        f"{folder}/{NAME}.yaml: is stale: re-compiled from {folder}/{NAME}.spec.yaml against "
        f"{folder}/{NAME}.snapshot.json; review the diff and stage it\n" + DIFF
    )
    provider = yaml.safe_load((folder / f"{NAME}.yaml").read_text())["provider"]
    # $0.90/M admits parasail/bf16 ($0.85/M), which the committed policy drops.
    assert "parasail/bf16" in provider["order"]
    assert provider["max_price"] == {"completion": "0.9"}
    assert _run("compile", folder / f"{NAME}.spec.yaml") == (0, "")  # now fresh


def test_check_mode_reports_and_leaves_the_file(tmp_path: Path) -> None:
    folder = _policies(tmp_path)
    before = (folder / f"{NAME}.yaml").read_text()
    _loosen_price_cap(folder / f"{NAME}.spec.yaml")
    code, out = _run("compile", "--check", folder / f"{NAME}.yaml")
    assert code == 1
    assert out == (
        f"{folder}/{NAME}.yaml: is stale; re-compile it: openrouter-probe policy compile "
        f"{folder}/{NAME}.spec.yaml --snapshot {folder}/{NAME}.snapshot.json -o {folder}/{NAME}.yaml\n"
        + DIFF
    )
    assert (folder / f"{NAME}.yaml").read_text() == before


def test_missing_compiled_file_is_written_and_fails(tmp_path: Path) -> None:
    folder = _policies(tmp_path)
    expected = (folder / f"{NAME}.yaml").read_text()
    (folder / f"{NAME}.yaml").unlink()
    code, out = _run("compile", folder / f"{NAME}.spec.yaml")
    assert code == 1
    assert out.startswith(f"{folder}/{NAME}.yaml: is missing: re-compiled from ")
    assert (folder / f"{NAME}.yaml").read_text() == expected
    provider = yaml.safe_load(expected)["provider"]
    lines = [line.split(" (")[0] for line in out.splitlines()[1:]]
    assert lines == [
        *(
            f"  a re-compile sets provider.{key} to {_listed(provider[key])}"
            for key in sorted(provider)
        ),
        *(f"  a re-compile admits {tag}" for tag in provider["order"]),
    ]


def _listed(value: object) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else json.dumps(value)


def test_a_compiler_version_change_says_why_the_file_is_stale(tmp_path: Path) -> None:
    """The compiled file records the compiler version: after an upgrade the block is the same and
    the hook says so, and what moved (issue 18: "is stale ... review the diff" showed no diff)."""
    folder = _policies(tmp_path)
    compiled = folder / f"{NAME}.yaml"
    compiled.write_text(
        compiled.read_text().replace(
            "compiler: openrouter-probe 0.2.0", "compiler: openrouter-probe 0.1.0"
        )
    )
    code, out = _run("compile", "--check", compiled)
    assert code == 1
    assert out.splitlines()[1:] == [
        "  the provider block and what it admits are unchanged",
        "  a re-compile records provenance.compiler openrouter-probe 0.2.0 "
        "(now openrouter-probe 0.1.0)",
    ]


def test_a_dropped_endpoint_is_named_with_its_precision_and_price(tmp_path: Path) -> None:
    folder = _policies(tmp_path)
    snap = folder / f"{NAME}.snapshot.json"
    doc = json.loads(snap.read_text())
    doc["data"]["endpoints"] = [
        e for e in doc["data"]["endpoints"] if e["tag"] != "siliconflow/fp8"
    ]
    snap.write_text(json.dumps(doc))
    code, out = _run("compile", "--check", folder / f"{NAME}.spec.yaml")
    assert code == 1
    assert out.splitlines()[-1] == (
        "  a re-compile drops siliconflow/fp8 (SiliconFlow, fp8 native, $0.27/M in, $0.42/M out; "
        "gone from the snapshot)"
    )


def test_changed_snapshot_makes_the_compiled_file_stale(tmp_path: Path) -> None:
    folder = _policies(tmp_path)
    snap = folder / f"{NAME}.snapshot.json"
    # The new snapshot: AtlasCloud raised its output price from $0.38/M to $0.50/M.
    snap.write_text(snap.read_text().replace('"0.00000038"', '"0.0000005"'))
    code, _ = _run("compile", snap)
    assert code == 1
    decisions = yaml.safe_load((folder / f"{NAME}.yaml").read_text())["decisions"]
    atlas = next(d for d in decisions if d["tag"] == "atlas-cloud/fp8")
    assert atlas["output_usd_per_m"] == 0.5


def test_no_snapshot_names_the_fix(tmp_path: Path) -> None:
    folder = _policies(tmp_path)
    (folder / f"{NAME}.snapshot.json").unlink()
    code, out = _run("compile", folder / f"{NAME}.spec.yaml")
    assert code == 1
    assert out == (
        f"Error: {folder}/{NAME}.yaml: no snapshot to check it against offline: save one next to it "
        f"(openrouter-probe endpoints deepseek/deepseek-v3.2 --save {folder}/{NAME}.snapshot.json) "
        "or give the hook args: [--snapshot, PATH]\n"
    )


def test_bundled_provenance_uses_the_bundled_snapshot(tmp_path: Path) -> None:
    for name in ("kimi-k2.5.spec.yaml", "kimi-k2.5.yaml"):
        shutil.copy(ROOT / "policies" / name, tmp_path / name)
    assert _run("compile", tmp_path / "kimi-k2.5.yaml") == (0, "")
    assert _run("lint", tmp_path / "kimi-k2.5.yaml") == (0, "")


def test_shared_snapshot_change_rechecks_every_tracked_spec_of_its_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _policies(tmp_path)
    shared = tmp_path / "snapshots" / "deepseek.json"
    shared.parent.mkdir()
    (folder / f"{NAME}.snapshot.json").rename(shared)
    for name in ("kimi-k2.5.spec.yaml", "kimi-k2.5.yaml"):  # another model: left alone
        shutil.copy(ROOT / "policies" / name, folder / name)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    assert _run("compile", "--snapshot", "snapshots/deepseek.json", "snapshots/deepseek.json") == (
        0,
        "",
    )
    _loosen_price_cap(folder / f"{NAME}.spec.yaml")
    code, out = _run("compile", "--snapshot", "snapshots/deepseek.json", "snapshots/deepseek.json")
    assert code == 1
    assert out.startswith(f"policies/{NAME}.yaml: is stale")
    assert "kimi" not in out


def test_lint_reports_a_display_name_in_a_hand_written_policy(tmp_path: Path) -> None:
    folder = _policies(tmp_path)
    shutil.copy(folder / f"{NAME}.snapshot.json", folder / "mine.snapshot.json")
    (folder / "mine.yaml").write_text(
        "provider:\n  order: [AtlasCloud, novita/fp8]\n  quantizations: [fp8]\n"
    )
    (folder / "notes.yaml").write_text("not: a policy\n")
    code, out = _run(
        "lint",
        folder / "mine.yaml",
        folder / "notes.yaml",
        folder / f"{NAME}.spec.yaml",
        folder / f"{NAME}.yaml",
    )
    assert code == 1
    assert out == (
        f"{folder}/mine.yaml: error: provider.order[0]: 'AtlasCloud' is a display name: OpenRouter "
        "matches lowercase slugs and silently drops it; use 'atlas-cloud' [display-name]\n"
    )


def test_lint_without_a_snapshot_names_the_file_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "block.yml").write_text("provider:\n  order: [deepseek]\n")
    code, out = _run("lint", tmp_path / "block.yml")
    assert code == 1
    assert out == (
        f"Error: {tmp_path}/block.yml: no snapshot to check it against offline: save one next to "
        f"it (openrouter-probe endpoints MODEL --save {tmp_path}/block.snapshot.json) "
        "or give the hook args: [--snapshot, PATH]\n"
    )


def test_lint_passes_the_example_policy(tmp_path: Path) -> None:
    folder = _policies(tmp_path)
    assert _run("lint", folder / f"{NAME}.yaml") == (0, "")


def test_hook_manifest_names_the_entry_points() -> None:
    manifest = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert {h["id"]: h["entry"] for h in manifest} == {
        "policy-compiled-fresh": "python -m openrouter_probe.cli.hooks compile",
        "policy-lint": "python -m openrouter_probe.cli.hooks lint",
    }
    assert all(h["language"] == "python" for h in manifest)


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=hooks@example.invalid", "-c", "user.name=hooks", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.mark.precommit
def test_hooks_under_pre_commit_try_repo(tmp_path: Path) -> None:
    """One try-repo run (one install) over a repository with a fresh, a stale and a bad policy."""
    pre_commit = shutil.which("pre-commit") or str(Path(sys.executable).with_name("pre-commit"))
    if not Path(pre_commit).exists() or shutil.which("git") is None:
        pytest.skip("needs git and pre-commit (pip install -e '.[dev]')")
    repo = tmp_path / "user-repo"
    repo.mkdir()
    fresh = _policies(repo)
    stale = repo / "team" / "policies"
    stale.mkdir(parents=True)
    for suffix in (".spec.yaml", ".snapshot.json", ".yaml"):
        shutil.copy(EXAMPLE / f"{NAME}{suffix}", stale / f"{NAME}{suffix}")
    _loosen_price_cap(stale / f"{NAME}.spec.yaml")
    shutil.copy(fresh / f"{NAME}.snapshot.json", fresh / "mine.snapshot.json")
    (fresh / "mine.yaml").write_text("provider:\n  order: [AtlasCloud]\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "policies")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [pre_commit, "try-repo", str(ROOT), "--all-files", "--color", "never"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = result.stdout + result.stderr
    if "An unexpected error has occurred" in out and "pip" in out:
        pytest.skip(
            f"the hook environment could not be installed (no package index?): {out[-500:]}"
        )
    assert result.returncode == 1, out
    assert (
        f"team/policies/{NAME}.yaml: is stale: re-compiled from team/policies/{NAME}.spec.yaml"
        in out
    )
    assert f"policies/{NAME}.yaml: is stale" not in out.replace(f"team/policies/{NAME}.yaml", "")
    assert "files were modified by this hook" in out
    assert (
        "policies/mine.yaml: error: provider.order[0]: 'AtlasCloud' is a display name: OpenRouter "
        "matches lowercase slugs and silently drops it; use 'atlas-cloud' [display-name]"
    ) in out
    # The stale file was rewritten; the fresh one is untouched.
    assert (fresh / f"{NAME}.yaml").read_text() == (EXAMPLE / f"{NAME}.yaml").read_text()
    assert (
        "parasail/bf16" in yaml.safe_load((stale / f"{NAME}.yaml").read_text())["provider"]["order"]
    )


def _git_here(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def test_the_manifest_and_the_documented_rev_name_what_exists() -> None:
    """Issue 18: the manifest cited docs/pre-commit.md (no such page) and the docs gave
    `rev: v0.1.0` (no such tag). The manifest passes pre-commit's own loader, every page it names
    exists, and every documented `rev:` is a full commit SHA (as `pre-commit autoupdate --freeze`
    writes one) of this repository that ships both hooks."""
    # pre-commit is in the dev extra, not the test extra (CI's lowest-versions run has no pre-commit)
    load_manifest = pytest.importorskip("pre_commit.clientlib").load_manifest

    manifest = ROOT / ".pre-commit-hooks.yaml"
    assert {hook["id"] for hook in load_manifest(str(manifest))} == {
        "policy-compiled-fresh",
        "policy-lint",
    }
    pages = re.findall(r"docs/[\w.-]+\.md", manifest.read_text())
    assert pages and all((ROOT / page).is_file() for page in pages), pages
    revs = {
        doc: re.findall(r"^\s+rev: (\S+)", (ROOT / doc).read_text(), re.MULTILINE)
        for doc in ("README.md", "docs/checked-in-policies.md")
    }
    assert all(revs.values()), revs
    for doc, found in revs.items():
        for rev in found:
            assert re.fullmatch(r"[0-9a-f]{40}", rev), f"{doc}: rev {rev} is not a commit SHA"
    if (
        shutil.which("git") is None
        or _git_here("rev-parse", "--is-shallow-repository").stdout != "false\n"
    ):
        pytest.skip("needs the repository's full git history")
    for rev in {r for found in revs.values() for r in found}:
        shown = _git_here("show", f"{rev}:.pre-commit-hooks.yaml")
        assert shown.returncode == 0, f"rev {rev}: {shown.stderr.strip()}"
        assert {h["id"] for h in yaml.safe_load(shown.stdout)} == {
            "policy-compiled-fresh",
            "policy-lint",
        }
