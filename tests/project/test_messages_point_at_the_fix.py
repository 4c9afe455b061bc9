"""Messages that point at the fix, and figures in the house style, where a new user touches the
tool. Each test failed before its change."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

import openrouter_probe as orp
from openrouter_probe.cli import cli
from tests.conftest import ROOT

MODEL = "moonshotai/kimi-k2.5"
SNAP = orp.bundled_snapshot(MODEL)
POLICY = str(ROOT / "policies" / "kimi-k2.5.yaml")


def _error(result: object) -> str:
    lines = [x for x in result.stderr.splitlines() if x.startswith("Error:")]  # type: ignore[attr-defined]
    assert len(lines) == 1, result.stderr  # type: ignore[attr-defined]
    return lines[0]


def test_verify_notes_say_the_cap_as_every_figure_does(tmp_path: Path) -> None:
    # "$0.5 cap" where everything else prints "$0.50"
    with orp.fake.serve(SNAP, speed=0) as fake:
        report = asyncio.run(
            orp.verify_precision(
                MODEL, out=tmp_path / "v.jsonl", base_url=fake.base_url, api_key="sk-fake",
                endpoints=["chutes/int4"], snapshot=SNAP, n=3, budget_usd="0.5", thinking="off",
            )
        )  # fmt: skip
        spent = fake.ledger.total_usd
    (note,) = [n for n in report.notes if n.startswith("sent ")]
    assert note == (
        f"sent 9 request(s) (0 of 9 already in {tmp_path / 'v.jsonl'}); spent ${spent:.6f} this "
        f"run, ${spent:.6f} in all of the $0.50 cap"
    )


def test_a_policy_given_as_a_snapshot_is_named_without_jsons_own_words() -> None:
    result = CliRunner().invoke(cli, ["matrix", MODEL, "--snapshot", POLICY])
    assert result.exit_code == 1
    line = _error(result)
    assert line == (
        f"Error: {POLICY}: not a snapshot but a text or YAML file; a snapshot is the JSON that "
        "`openrouter-probe endpoints MODEL --save PATH` writes"
    )
    assert "Expecting value" not in result.output and "char 0" not in result.output


def test_a_snapshot_cut_short_says_where(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text('{\n  "model": "moonshotai/kimi-k2.5",\n  "data": {"endpoints": [', "utf-8")
    result = CliRunner().invoke(cli, ["matrix", MODEL, "--snapshot", str(cut)])
    assert result.exit_code == 1
    assert _error(result) == (
        f"Error: {cut}: not valid JSON at line 3, column 26 (Expecting value); a snapshot is the "
        "JSON that `openrouter-probe endpoints MODEL --save PATH` writes: save it again"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["budget", MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "60M"],
        ["matrix", MODEL, "--offline"],
    ],
)
def test_a_plot_into_a_missing_folder_makes_it(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file written whole makes its missing folders, as the README says of ``-o`` (review of
    0.3: only ``export`` did; ``--plot`` said "create it first")."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, [*args, "--plot", "nodir/deeper/b.png"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "nodir" / "deeper" / "b.png").read_bytes().startswith(b"\x89PNG")
    assert [p.name for p in (tmp_path / "nodir" / "deeper").iterdir()] == ["b.png"]


def test_a_compiled_policy_and_a_snapshot_go_into_missing_folders(tmp_path: Path) -> None:
    spec = ROOT / "policies" / "kimi-k2.5.spec.yaml"
    compiled = tmp_path / "n1" / "n2" / "k.yaml"
    result = CliRunner().invoke(
        cli, ["policy", "compile", str(spec), "--offline", "-o", str(compiled)]
    )
    assert result.exit_code == 0, result.output
    assert "provider:" in compiled.read_text()
    saved = tmp_path / "a" / "b" / "c.json"
    result = CliRunner().invoke(cli, ["endpoints", MODEL, "--offline", "--save", str(saved)])
    assert result.exit_code == 0, result.output
    assert '"endpoints"' in saved.read_text()


def test_a_difference_inside_the_tolerance_has_its_own_verdict(tmp_path: Path) -> None:
    # issue 26: DeepInfra at --degrade 0.1 printed "differs" with +5.5 pp, [+3.1, +9.6] against a
    # 10 pp tolerance: equality rejected and equivalence shown at once
    import json

    import yaml

    out, evidence = tmp_path / "v.jsonl", tmp_path / "measured.yaml"
    args = ["verify", MODEL, "--endpoints", "chutes/int4,deepinfra/int4", "--n", "200"]
    args += ["--out", str(out), "--budget-usd", "1", "--quiet", "--thinking", "off"]
    with orp.fake.serve(SNAP, speed=0, degrade=["deepinfra/int4=0.1"]) as fake:
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
        table = CliRunner().invoke(cli, [*args, "--evidence", str(evidence)], env=env)
        shown = CliRunner().invoke(cli, [*args, "--format", "json"], env=env)  # sends nothing
        sent = len(fake.ledger)
    assert table.exit_code == shown.exit_code == 0, table.output
    assert sent == 800  # 200 prompts x (2 endpoints + the reference twice), once
    lines = table.stdout.splitlines()
    report = lines[lines.index("") :]  # the plan, a blank line, the report
    row = next(i for i, line in enumerate(report) if line.startswith("deepinfra/int4 "))
    lines = report
    assert lines[row].startswith("deepinfra/int4  differs,      200  94.5 +5.5 [+3.1,+9.6]  ")
    assert lines[row + 1] == " " * 16 + "within tolerance"  # under the verdict column
    assert max(len(line) for line in lines) <= 80
    reason = next(x for x in lines if x.startswith("deepinfra/int4: "))
    assert reason.startswith("deepinfra/int4: less accurate than the reference by 5.5 pp")
    assert "a real difference, smaller than the" in table.stdout
    verdicts = {r["tag"]: r["verdict"] for r in json.loads(shown.stdout)}
    assert verdicts == {
        "moonshotai/int4": None,
        "chutes/int4": "consistent",
        "deepinfra/int4": "differs, within tolerance",
    }
    doc = yaml.safe_load(evidence.read_text(encoding="utf-8"))
    assert {m["endpoint"]: m["verdict"] for m in doc["measured"]} == {
        "chutes/int4": "consistent",
        "deepinfra/int4": "differs, within tolerance",
    }
    # read back: the matrix shows it, and a spec can exclude it by name (or keep it)
    date = doc["measured"][0]["date"]
    matrix = CliRunner().invoke(
        cli, ["matrix", MODEL, "--offline", "--precision-file", str(evidence), "--format", "json"]
    )
    measured = {r["tag"]: r["measured"] for r in json.loads(matrix.stdout)}
    assert measured["deepinfra/int4"] == f"differs, within tolerance (n=200, {date})"
    for listed, ignored in (('["differs, within tolerance"]', True), ("[differs]", False)):
        spec = tmp_path / "spec.yaml"
        spec.write_text(f"model: {MODEL}\nexclude_measured: {listed}\n", encoding="utf-8")
        compiled = CliRunner().invoke(
            cli, ["policy", "compile", str(spec), "--offline", "--precision-file", str(evidence)]
        )
        assert compiled.exit_code == 0, compiled.output
        block = yaml.safe_load(compiled.stdout)["provider"]
        assert ("deepinfra/int4" in block.get("ignore", [])) is ignored, block


# -- advice that points the right way -------------------------------------------------------------


def _prompts(tmp_path: Path) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a", "prompt": "hi"}\n{"id": "b", "prompt": "yo"}\n', "utf-8")
    return path


def test_max_tokens_above_every_limit_says_lower_it(tmp_path: Path) -> None:
    # it said "Re-compile the policy against a fresh snapshot": the policy was fine
    args = ["generate", str(_prompts(tmp_path)), "--policy", POLICY, "-o", str(tmp_path / "o")]
    result = CliRunner().invoke(
        cli, [*args, "--max-tokens", "300000", "--dry-run", "--snapshot", "bundled"]
    )
    assert result.exit_code == 1
    assert _error(result) == (
        f"Error: {POLICY}: admits none of the 11 endpoints serving {MODEL} now with "
        "--max-tokens 300000: above the output limit of each of the 6 it admits. Lower it to "
        "--max-tokens 235929 or less, the largest they take (siliconflow/int4)"
    )
    assert "Re-compile" not in result.output
    ok = CliRunner().invoke(
        cli, [*args, "--max-tokens", "235929", "--dry-run", "--snapshot", "bundled"]
    )
    assert ok.exit_code == 0, ok.output  # the value it gave is taken


def test_the_plan_prices_only_the_endpoints_that_can_serve_the_request(tmp_path: Path) -> None:
    # it priced at "the cheapest admitted $2.20/M (Chutes)", whose limit is 65,535; the run is
    # served by SiliconFlow at $2.25/M
    import json

    limits = {e.tag: e.max_completion_tokens for e in SNAP.endpoints}
    assert limits["chutes/int4"] == 65535 and limits["siliconflow/int4"] == 235929
    prompts, out = _prompts(tmp_path), tmp_path / "o.jsonl"
    args = ["generate", str(prompts), "--policy", POLICY, "-o", str(out), "--max-tokens", "100000"]
    plan = CliRunner().invoke(
        cli, [*args, "--dry-run", "--snapshot", "bundled", "--budget-usd", "1"]
    )
    assert plan.exit_code == 0, plan.output
    assert "at the cheapest admitted $2.25/M (SiliconFlow) cost $0.45" in " ".join(
        plan.stdout.split()
    )
    assert "Chutes" not in plan.stdout
    with orp.fake.serve(SNAP, speed=0) as fake:
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
        run = CliRunner().invoke(cli, [*args, "--budget-usd", "1", "--quiet"], env=env)
        served = {entry.tag for entry in fake.ledger.entries}
    assert run.exit_code == 0, run.output
    assert served == {"siliconflow/int4"}
    rows = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    assert {r["provider"] for r in rows} == {"SiliconFlow"}
    # the library, asked the same
    budget = orp.plan_budget(
        SNAP, budget_usd=1, output_tokens=200_000, max_tokens=100_000,
        provider=orp.load_compiled_policy(POLICY).provider,
    )  # fmt: skip
    assert budget.cheapest.tag == "siliconflow/int4"
    assert "chutes/int4" not in {r["tag"] for r in budget.endpoint_rows()}


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            ["pol.yaml", "--policy", "pol.yaml"],
            "PROMPTS pol.yaml is a compiled policy, not prompts; give the prompts (JSON lines) "
            "first: `openrouter-probe generate PROMPTS.jsonl --policy pol.yaml -o o.jsonl`",
        ),
        (
            ["p.jsonl", "--policy", "p.jsonl"],
            "--policy p.jsonl is a prompts file, not a policy; give a compiled policy: "
            "`openrouter-probe generate p.jsonl --policy POLICY.yaml -o o.jsonl`",
        ),
        (
            ["pol.yaml", "--policy", "p.jsonl"],
            "pol.yaml is a compiled policy and p.jsonl a prompts file; swap them: "
            "`openrouter-probe generate p.jsonl --policy pol.yaml -o o.jsonl`",
        ),
        (
            ["spec.yaml", "--policy", "pol.yaml"],
            "PROMPTS spec.yaml is a policy spec, not prompts; give the prompts (JSON lines) "
            "first: `openrouter-probe generate PROMPTS.jsonl --policy pol.yaml -o o.jsonl`",
        ),
    ],
)
def test_a_policy_given_as_prompts_and_prompts_given_as_a_policy(
    given: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # they printed twelve lines of "not JSON", or a YAML parse error
    monkeypatch.chdir(tmp_path)
    _prompts(tmp_path)
    (tmp_path / "pol.yaml").write_text(Path(POLICY).read_text("utf-8"), "utf-8")
    spec = (ROOT / "policies" / "kimi-k2.5.spec.yaml").read_text("utf-8")
    (tmp_path / "spec.yaml").write_text(spec, "utf-8")
    result = CliRunner().invoke(
        cli, ["generate", *given, "-o", "o.jsonl", "--dry-run", "--snapshot", "bundled"]
    )
    assert result.exit_code == 2, result.output
    assert _error(result) == f"Error: {said}"
    assert "not JSON" not in result.output and "YAML" not in result.output
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("args", [["endpoints", MODEL], ["matrix", MODEL], ["models"]])
def test_a_base_url_without_api_v1_is_the_urls_fault(args: list[str]) -> None:
    # `endpoints` said "Check the model id" when OPENROUTER_BASE_URL lacked /api/v1
    with orp.fake.serve(SNAP, speed=0) as fake:
        base = fake.base_url.removesuffix("/api/v1")
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": base}
        result = CliRunner().invoke(cli, args, env=env)
        right = CliRunner().invoke(
            cli, [*args, "--format", "json"], env={**env, "OPENROUTER_BASE_URL": fake.base_url}
        )
    assert result.exit_code == 1
    assert _error(result) == (
        f"Error: {base}/models answers 404: OPENROUTER_BASE_URL={base} is not an OpenRouter API "
        f"URL. Give the API's root, ending in /api/v1, e.g. {base}/api/v1"
    )
    assert "model id" not in result.output
    assert right.exit_code == 0, right.output  # the form it gives works


def test_an_unknown_model_on_the_right_url_still_says_check_the_model_id() -> None:
    with orp.fake.serve(SNAP, speed=0) as fake:
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
        result = CliRunner().invoke(cli, ["endpoints", "moonshotai/nope"], env=env)
    assert result.exit_code == 1
    assert "Check the model id with `openrouter-probe models`" in _error(result)
