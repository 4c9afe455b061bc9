"""The precision check end to end: sending through the generator's run to the fake server (and to a
stub that leaks pins), the cap, resume, logprobs, the CLI and the evidence read back."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from aiohttp import web
from click.testing import CliRunner

import openrouter_probe as orp
from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake.content import arithmetic_answer
from openrouter_probe.rules.precision import PrecisionRegistry
from openrouter_probe.rules.snapshot import bundled_snapshot, load_snapshot
from openrouter_probe.run.send.transport import Failure, parse_body
from tests.conftest import ROOT

MODEL = "moonshotai/kimi-k2.5"
SNAP = bundled_snapshot(MODEL)
INT4 = [e.tag for e in SNAP.endpoints if e.quantization == "int4" and e.slug != "moonshotai"]
POLICY = ROOT / "policies" / "kimi-k2.5.yaml"
DEGRADED = {"deepinfra/int4": 0.1, "siliconflow/int4": 0.2}
#: The temperature-0 measures on answers without reasoning (the default thinks as the job does)
OFF = ("--thinking", "off")


def _check(out: Path, *, base_url: str, **kwargs: Any) -> orp.VerifyReport:
    options: dict[str, Any] = {
        "endpoints": INT4,
        "snapshot": SNAP,
        "api_key": "sk-fake",
        "budget_usd": 1,
        "thinking": "off",  # the temperature-0 measures, answers without reasoning
    }
    options.update(kwargs)
    return asyncio.run(orp.verify_precision(MODEL, out=out, base_url=base_url, **options))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flags_both_degraded_endpoints_and_no_native_one(tmp_path: Path, seed: int) -> None:
    with orp.fake.serve(SNAP, speed=0, seed=seed, degrade=DEGRADED) as fake:
        report = _check(tmp_path / "v.jsonl", base_url=fake.base_url, seed=seed)
        billed = fake.ledger.total_usd
        generations = len(fake.ledger)
    assert report.verdicts == {
        "chutes/int4": "consistent",
        "deepinfra/int4": "differs",
        "siliconflow/int4": "differs",
        "atlas-cloud/int4": "consistent",
        "parasail/int4": "consistent",
    }
    assert generations == 7 * 200  # the reference twice: the floor
    assert report.result("moonshotai/int4").measures.accuracy == 1.0
    assert report.result("siliconflow/int4").measures.accuracy < 0.9
    # What the report counts as spent is what the server billed, to the cent fraction.
    assert Decimal(str(round(sum(r.measures.cost_usd for r in report.results), 8))) == billed
    assert report.run.spent_usd == billed


def test_ten_prompts_are_inconclusive_not_consistent(tmp_path: Path) -> None:
    with orp.fake.serve(SNAP, speed=0, degrade=DEGRADED) as fake:
        report = _check(tmp_path / "v.jsonl", base_url=fake.base_url, n=10)
    assert set(report.verdicts.values()) == {"inconclusive"}
    reason = report.result("chutes/int4").comparison.reason  # type: ignore[union-attr]
    assert "paired prompts would settle it" in reason


def test_the_cap_holds_across_every_endpoint(tmp_path: Path) -> None:
    budget = Decimal("0.01")  # the plan's worst case is $0.89, the real cost $0.04: it stops
    with orp.fake.serve(SNAP, speed=0, record_requests=True) as fake:
        report = _check(tmp_path / "v.jsonl", base_url=fake.base_url, budget_usd=budget)
        billed = fake.ledger.total_usd
        # verify's repeats are measured anew: never the response cache, no row identity
        assert fake.fake.response_cache.stores == 0 and fake.fake.requests
        assert not any("session_id" in body for body in fake.fake.requests)
    assert billed <= budget
    assert report.run.stop_reason == "budget"
    assert report.run.peak_committed_usd <= budget
    assert sum(r.missing for r in report.results) > 0
    # Only items answered on both sides are paired.
    ref = report.result("moonshotai/int4").measures.scored
    for r in report.results[1:]:
        assert r.comparison is not None
        assert r.comparison.counts.n <= min(ref, r.measures.scored)
    assert any("stopped early (budget)" in n for n in report.notes)


def test_a_rerun_sends_nothing_already_scored(tmp_path: Path) -> None:
    out = tmp_path / "v.jsonl"
    with orp.fake.serve(SNAP, speed=0, degrade=DEGRADED) as fake:
        first = _check(out, base_url=fake.base_url, n=20)
        sent = len(fake.ledger)
        again = _check(out, base_url=fake.base_url, n=20)
        assert len(fake.ledger) == sent == 140  # 20 items x 5 endpoints + the reference twice
        # A larger n extends the run: only the 10 new items go out, to each endpoint.
        more = _check(out, base_url=fake.base_url, n=30)
        assert len(fake.ledger) == 210
    assert again.run.requests == 0 and again.run.rows_already_done == 140
    assert again.verdicts == first.verdicts
    assert more.run.requests == 70
    assert more.result("chutes/int4").measures.scored == 30


def _with_logprobs(tmp_path: Path, tags: list[str]) -> Any:
    doc = SNAP.to_json()
    doc.pop("sha256")
    for e in doc["data"]["endpoints"]:
        if e["tag"] in tags:
            e["supported_parameters"] = [*e["supported_parameters"], "logprobs", "top_logprobs"]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return load_snapshot(path)


def test_first_token_logprobs_are_kept_and_compared(tmp_path: Path) -> None:
    snap = _with_logprobs(tmp_path, ["moonshotai/int4", "chutes/int4", "deepinfra/int4"])
    out = tmp_path / "v.jsonl"
    with orp.fake.serve(snap, speed=0, degrade={"deepinfra/int4": 0.2}) as fake:
        report = _check(
            out,
            base_url=fake.base_url,
            snapshot=snap,
            endpoints=["chutes/int4", "deepinfra/int4"],
            n=20,
        )
    lines = [json.loads(t) for t in out.read_text().splitlines()]
    assert all(isinstance(r["logprobs"], dict) for r in lines)
    chutes = report.result("chutes/int4").measures
    deepinfra = report.result("deepinfra/int4").measures
    assert chutes.logprob_pairs == deepinfra.logprob_pairs == 20
    assert chutes.first_token_tv_mean == 0.0
    assert deepinfra.first_token_tv_mean is not None and deepinfra.first_token_tv_mean > 0
    # the floor of the distance: the reference's second run against its first (the same here)
    assert report.result("moonshotai/int4").measures.first_token_tv_floor == 0.0
    assert deepinfra.first_token_tv_floor == 0.0 < deepinfra.first_token_tv_mean


def test_parse_body_keeps_the_choice_logprobs() -> None:
    logprobs = {"content": [{"token": "4", "logprob": -0.01, "top_logprobs": []}]}
    body = {
        "id": "gen-1",
        "provider": "Chutes",
        "model": MODEL,
        "choices": [{"message": {"content": "4"}, "finish_reason": "stop", "logprobs": logprobs}],
    }
    answer = parse_body(json.dumps(body))
    assert not isinstance(answer, Failure)
    assert answer.logprobs == logprobs
    body["choices"][0]["logprobs"] = None
    assert parse_body(json.dumps(body)).logprobs is None  # type: ignore[union-attr]


# -- a leaked pin: a stub that serves some pinned requests from another provider --------------------


class LeakyStub:
    """Answers arithmetic correctly; requests pinned to ``leak_from`` are served by ``leak_to`` on
    every ``every``-th item. Records every request body."""

    def __init__(self, *, leak_from: str, leak_to: str, every: int) -> None:
        self.names = {e.tag: e.provider_name for e in SNAP.endpoints}
        self.leak_from, self.leak_to, self.every = leak_from, leak_to, every
        self.bodies: list[dict[str, Any]] = []
        self.leaked = 0

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        (tag,) = body["provider"]["only"]
        assert body["provider"]["allow_fallbacks"] is False
        index = int(body["messages"][0]["content"].split()[2]) % self.every  # operand as a hash
        provider = self.names[tag]
        if tag == self.leak_from and index == 0:
            provider = self.names[self.leak_to]
            self.leaked += 1
        answer = arithmetic_answer(body["messages"][-1]["content"])
        return web.json_response(
            {
                "id": f"gen-{len(self.bodies)}",
                "model": "moonshotai/kimi-k2.5-0127",
                "provider": provider,
                "choices": [
                    {"message": {"content": answer}, "finish_reason": "stop", "logprobs": None}
                ],
                "usage": {"prompt_tokens": 40, "completion_tokens": 6, "cost": 0.00003},
            }
        )


async def _serve_stub(stub: LeakyStub, run: Any) -> Any:
    app = web.Application()
    app.router.add_post("/api/v1/chat/completions", stub.chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        return await run(f"http://127.0.0.1:{port}/api/v1")
    finally:
        await runner.cleanup()


def test_a_leaked_pin_is_discarded_and_counted(tmp_path: Path) -> None:
    stub = LeakyStub(leak_from="deepinfra/int4", leak_to="chutes/int4", every=4)

    async def run(url: str) -> orp.VerifyReport:
        return await orp.verify_precision(
            MODEL,
            out=tmp_path / "v.jsonl",
            endpoints=["chutes/int4", "deepinfra/int4"],
            n=40,
            snapshot=SNAP,
            api_key="sk-test",
            base_url=url,
            budget_usd=1,
            thinking="off",
        )

    report = asyncio.run(_serve_stub(stub, run))
    assert stub.leaked > 0
    deepinfra = report.result("deepinfra/int4")
    assert deepinfra.leaked == stub.leaked
    assert deepinfra.measures.scored == 40 - stub.leaked
    assert deepinfra.comparison is not None and deepinfra.comparison.counts.n == 40 - stub.leaked
    assert report.result("chutes/int4").leaked == 0
    assert any("leaked pins" in n for n in report.notes)
    # Every request was pinned to exactly one endpoint, with the same settings everywhere.
    assert {b["provider"]["only"][0] for b in stub.bodies} == {
        "moonshotai/int4",
        "chutes/int4",
        "deepinfra/int4",
    }
    assert {(b["temperature"], b["seed"], json.dumps(b["reasoning"])) for b in stub.bodies} == {
        (0, 20260127, '{"effort": "none"}')
    }


def test_no_key_is_refused_before_anything_is_sent(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="export OPENROUTER_API_KEY"):
        asyncio.run(orp.verify_precision(MODEL, out=tmp_path / "v.jsonl", snapshot=SNAP))
    assert not (tmp_path / "v.jsonl").exists()


# -- the CLI -----------------------------------------------------------------------------------------


def test_cli_dry_run_prints_the_plan_and_its_cost(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["verify", MODEL, "--offline", "--endpoints", ",".join(INT4), "--dry-run", *OFF],
        env={"OPENROUTER_API_KEY": ""},
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == "200 prompts x 6 endpoints (the reference x2) = 1400 requests"
    assert "moonshotai/int4  reference   400   0.60   3.00   $0.0196   $0.3604 seed" in lines
    assert "total                       1400                 $0.0590   $1.0863" in lines
    assert max(len(line) for line in lines) <= 80


def test_cli_fake_run_writes_evidence_that_matrix_and_policy_honour(tmp_path: Path) -> None:
    runner = CliRunner()
    out, evidence = tmp_path / "verify.jsonl", tmp_path / "measured.yaml"
    args = ["verify", MODEL, "--endpoints", ",".join(INT4), "--n", "200", "--thinking", "off"]
    args += ["--out", str(out), "--budget-usd", "1", "--evidence", str(evidence), "--quiet"]
    # the rehearsal: `fake-server --speed 0 --degrade ...` and OPENROUTER_BASE_URL at it
    degrade = ["deepinfra/int4=0.1", "siliconflow/int4=0.2"]
    with orp.fake.serve(SNAP, speed=0, degrade=degrade) as fake:
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
        result = runner.invoke(cli, args, env=env)
    assert result.exit_code == 0, result.output
    table = result.stdout.splitlines()
    assert any(line.startswith("deepinfra/int4   differs") for line in table)
    assert any(line.startswith("chutes/int4      consistent") for line in table)
    assert max(len(line) for line in table) <= 80
    doc = yaml.safe_load(evidence.read_text())
    assert {(m["endpoint"], m["verdict"], m["n"]) for m in doc["measured"]} == {
        ("chutes/int4", "consistent", 200),
        ("deepinfra/int4", "differs", 200),
        ("siliconflow/int4", "differs", 200),
        ("atlas-cloud/int4", "consistent", 200),
        ("parasail/int4", "consistent", 200),
    }
    date = doc["measured"][0]["date"]

    shown = runner.invoke(
        cli,
        ["matrix", MODEL, "--offline", "--precision-file", str(evidence), "--format", "json"],
    )
    assert shown.exit_code == 0, shown.output
    measured = {r["tag"]: r["measured"] for r in json.loads(shown.stdout)}
    assert measured["deepinfra/int4"] == f"differs (n=200, {date})"
    assert measured["chutes/int4"] == f"consistent (n=200, {date})"
    assert measured["fireworks"] is None

    spec = tmp_path / "spec.yaml"
    spec.write_text(f"model: {MODEL}\nprecision: native\nexclude_measured: [differs]\n")
    compiled = runner.invoke(
        cli,
        ["policy", "compile", str(spec), "--offline", "--precision-file", str(evidence)],
    )
    assert compiled.exit_code == 0, compiled.output
    block = yaml.safe_load(compiled.stdout)["provider"]
    assert block["ignore"] == ["deepinfra/int4", "siliconflow/int4"]
    assert block["order"] == ["chutes/int4", "atlas-cloud/int4", "parasail/int4", "moonshotai/int4"]
    policy = orp.compile_policy(
        orp.load_spec(spec), SNAP, registry=PrecisionRegistry.load(evidence)
    )
    reasons = {d.tag: d.reason for d in policy.decisions}
    assert reasons["deepinfra/int4"] == (
        f"dropped: ignored (measured differs (n=200, {date}) against moonshotai/int4, and the "
        "spec's exclude_measured lists differs)"
    )


def test_cli_verify_keeps_what_a_user_of_the_real_api_needs() -> None:
    # issue 22 item 6: the fake's knobs are fake-server's; verify had 25 options (19, then
    # issue 35's --sampling and --sampled-n, then --thinking)
    command = cli.commands["verify"]
    names = [o for p in command.params if isinstance(p, click.Option) for o in p.opts]
    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    assert len(options) <= 22, [p.name for p in options]
    shown_names = {o for p in options for o in p.opts}
    for gone in ("--fake", "--fake-seed", "--degrade", "--degrade-flip", "--degrade-tools"):
        assert gone not in shown_names and gone in names  # hidden: it says where it went
    shown = CliRunner().invoke(cli, ["verify", "--help"]).output.split("Options:")[1]
    assert len([line for line in shown.splitlines() if line.startswith("  -")]) == 22 + 1  # --help
    result = CliRunner().invoke(
        cli, ["verify", MODEL, "--offline", "--degrade", "chutes/int4=0.1", "--dry-run"]
    )
    assert result.exit_code == 2
    assert (
        "Error: --degrade is fake-server's option now: start `openrouter-probe fake-server "
        "--offline --speed 0 --degrade ...` and set OPENROUTER_BASE_URL to the URL it prints"
    ) in " ".join(result.output.split())
    served = cli.commands["fake-server"]
    served_names = {o for p in served.params for o in getattr(p, "opts", ())}
    assert {"--degrade", "--degrade-flip", "--degrade-tools", "--noise", "--seed"} <= served_names


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--tolerance", "1"], "Invalid value for '--tolerance': 1.0 is not in the range 0<x<1"),
        (["--alpha", "0"], "Invalid value for '--alpha': 0.0 is not in the range 0<x<1"),
        (["--power", "1.5"], "Invalid value for '--power'"),
        (["--repeats", "1"], "Invalid value for '--repeats': 1 is not in the range 2<=x<=10"),
        (["--n", "0"], "Invalid value for '--n'"),
    ],
)
def test_cli_statistical_options_are_checked_before_anything_is_sent(
    tmp_path: Path, option: list[str], message: str
) -> None:
    # --tolerance 1 used to spend the money and then crash: now it is a usage error up front
    with orp.fake.serve(SNAP, speed=0) as fake:
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
        out = tmp_path / "v.jsonl"
        result = CliRunner().invoke(
            cli, ["verify", MODEL, "--endpoints", "chutes", "--out", str(out), *option], env=env
        )
        assert len(fake.ledger) == 0
    assert result.exit_code == 2
    assert message in result.output
    assert not out.exists()


def test_verify_precision_checks_its_arguments_before_sending(tmp_path: Path) -> None:
    with orp.fake.serve(SNAP, speed=0) as fake:
        for bad, message in (
            ({"tolerance": 1.0}, "tolerance=1.0: must be"),
            ({"alpha": 0.0}, "alpha=0.0: must be"),
            ({"power": 1.0}, "power=1.0: must be"),
            ({"repeats": 1}, "repeats=1: must be"),
            ({"n": 0}, "n=0: must be"),
        ):
            with pytest.raises(ConfigError, match=message):
                _check(tmp_path / "v.jsonl", base_url=fake.base_url, **bad)
        assert len(fake.ledger) == 0
    assert not (tmp_path / "v.jsonl").exists()


def test_cli_endpoints_takes_a_slug_with_one_endpoint(tmp_path: Path) -> None:
    # issue 18: --endpoints chutes is the one chutes endpoint, chutes/int4
    result = CliRunner().invoke(
        cli,
        ["verify", MODEL, "--offline", "--endpoints", "chutes", "--dry-run"],
        env={"OPENROUTER_API_KEY": ""},
    )
    assert result.exit_code == 0, result.output
    assert any(line.startswith("chutes/int4     compared") for line in result.stdout.splitlines())


# -- the registry's measured: section ----------------------------------------------------------------


def _registry(tmp_path: Path, entries: list[dict[str, Any]], name: str = "m.yaml") -> Any:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"measured": entries}), encoding="utf-8")
    return PrecisionRegistry.load(path)


def _entry(**kw: Any) -> dict[str, Any]:
    base = {
        "model": "moonshotai/kimi-k2.5*",
        "endpoint": "chutes/int4",
        "verdict": "consistent",
        "n": 200,
        "date": "2026-11-01",
    }
    base.update(kw)
    return base


def test_measured_for_returns_the_latest_by_date(tmp_path: Path) -> None:
    reg = _registry(
        tmp_path,
        [
            _entry(date="2026-10-01", verdict="differs"),
            _entry(date="2026-11-02", verdict="inconclusive", n=10, accuracy=0.9),
            _entry(date="2026-11-01"),
            _entry(endpoint="deepinfra/int4", verdict="differs"),
        ],
    )
    latest = reg.measured_for(MODEL, "chutes/int4")
    assert (latest.verdict, latest.n, latest.date) == ("inconclusive", 10, "2026-11-02")
    assert latest.extra == {"accuracy": 0.9}
    assert reg.measured_for(MODEL, "atlas-cloud/int4") is None
    assert reg.measured_for("deepseek/deepseek-v3.2", "chutes/int4") is None
    chutes = next(e for e in SNAP.endpoints if e.tag == "chutes/int4")
    assert str(reg.verdict(MODEL, chutes).measured) == "inconclusive (n=10, 2026-11-02)"
    assert reg.verdict(MODEL, chutes).verdict == "native"  # the declared verdict is unchanged


def test_an_unquoted_yaml_date_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "measured:\n- {model: moonshotai/kimi-k2.5, endpoint: chutes/int4, verdict: differs,"
        " n: 50, date: 2026-11-30}\n"
    )
    assert str(PrecisionRegistry.load(path).measured_for(MODEL, "chutes/int4")) == (
        "differs (n=50, 2026-11-30)"
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (_entry(verdict="same"), r"measured\[0\]\.verdict: 'same'; use one of consistent, differs"),
        (_entry(endpoint="chutes"), r"measured\[0\]\.endpoint: 'chutes'; give the full tag"),
        ({"model": MODEL, "endpoint": "chutes/int4"}, r"measured\[0\]: needs verdict, n, date"),
        (_entry(n="many"), r"measured\[0\]\.n: 'many'"),
    ],
)
def test_a_bad_measured_entry_names_the_file_and_the_fix(
    tmp_path: Path, entry: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        _registry(tmp_path, [entry])
    assert str(tmp_path / "m.yaml") in str(info.value)


def test_cli_runs_against_the_server_named_by_openrouter_base_url(tmp_path: Path) -> None:
    out = tmp_path / "v.jsonl"
    with orp.fake.serve(SNAP, speed=0) as fake:
        result = CliRunner().invoke(
            cli,
            ["verify", MODEL, "--endpoints", "chutes/int4", "--n", "10", "--out", str(out), *OFF],
            env={"OPENROUTER_BASE_URL": fake.base_url, "OPENROUTER_API_KEY": "sk-fake"},
        )
        assert len(fake.ledger) == 30  # the endpoints were read live from the same server
    assert result.exit_code == 0, result.output
    assert (
        "chutes/int4     inconclusive   10 100.0 +0.0 [-21.3,+21.3]        1  $0.0003"
        in result.stdout
    )


def test_cli_policy_compares_what_the_policy_admits() -> None:
    result = CliRunner().invoke(
        cli,
        ["verify", MODEL, "--offline", "--policy", str(POLICY), "--dry-run"],
        env={"OPENROUTER_API_KEY": ""},
    )
    assert result.exit_code == 0, result.output
    roles = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()[3:9]}
    assert roles == {
        "moonshotai/int4": "reference",
        "chutes/int4": "compared",
        "deepinfra/int4": "compared",
        "siliconflow/int4": "compared",
        "atlas-cloud/int4": "compared",
        "parasail/int4": "compared",
    }


def test_offline_without_fake_plans_and_sends_nothing(tmp_path: Path) -> None:
    """--offline promises no network and no spending: with a key set it still only plans."""
    with orp.fake.serve(speed=0) as fake:
        env = {"OPENROUTER_API_KEY": "sk-fake", "OPENROUTER_BASE_URL": fake.base_url}
        result = CliRunner().invoke(
            cli,
            [
                "verify",
                "moonshotai/kimi-k2.5",
                "--offline",
                "--n",
                "5",
                "--thinking",
                "off",
                "--out",
                str(tmp_path / "v.jsonl"),
            ],
            env=env,
        )
        assert result.exit_code == 0, result.output
        assert "--offline sends nothing, so this is the plan only" in result.stderr
        assert "60 requests" in result.stdout and "$0.0505" in result.stdout  # the plan
        assert fake.ledger.total_usd == 0
        assert not (tmp_path / "v.jsonl").exists()


def test_verify_keeps_a_spend_journal_that_counts_on_a_rerun(tmp_path: Path) -> None:
    """verify runs on generate's run path: a journal beside --out, and what it holds that no line
    of the output accounts for (a request in flight when a run was killed) counts against the cap."""
    out = tmp_path / "v.jsonl"
    journal = tmp_path / "v.jsonl.ledger"
    with orp.fake.serve(SNAP, speed=0) as fake:
        first = _check(out, base_url=fake.base_url, n=5)
        lines = [json.loads(line) for line in journal.read_text().splitlines()]
        header, sent = lines[0], [line for line in lines if "sent" in line]
        assert header["command"] == "verify" and header["out"] == "v.jsonl"
        assert len(sent) == first.run.requests == 7 * 5
        # A killed run's request: journaled as sent, never settled, no output line holds it.
        with journal.open("a") as handle:
            handle.write(json.dumps({"sent": 1, "run": "killed", "id": "x", "reserved_usd": "0.5"}))
            handle.write("\n")
        again = _check(out, base_url=fake.base_url, n=6, budget_usd="0.5")
        assert len(fake.ledger) == 35  # 0.5 spent before: nothing more fits under a 0.5 cap
    assert again.run.possibly_billed_before_usd == Decimal("0.5")
    assert again.run.killed_in_flight_before == 1
    assert again.run.stop_reason == "budget" and again.run.requests == 0


def test_verify_honours_read_timeout_in_every_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22: verify built its run settings without ``read_timeout_s``: each attempt's ceiling
    was read_timeout 300 s + max_tokens / 4 whatever ``--read-timeout`` said. The transport and
    the ceilings now come from the one config."""
    from openrouter_probe.run.send import transport

    seen: list[tuple[float, float | None, int]] = []
    original = transport.HttpTransport.send

    async def send(self: Any, body: bytes, **kwargs: Any) -> Any:
        seen.append((self._read_timeout_s, kwargs.get("ceiling_s"), json.loads(body)["max_tokens"]))
        return await original(self, body, **kwargs)

    monkeypatch.setattr(transport.HttpTransport, "send", send)
    with orp.fake.serve(SNAP, speed=0) as fake:
        report = _check(tmp_path / "v.jsonl", base_url=fake.base_url, n=4, read_timeout_s=7.0)
    assert report.run is not None and report.run.requests == len(seen) > 0
    for read_timeout, ceiling, max_tokens in seen:
        assert read_timeout == 7.0
        assert ceiling == 7.0 + max_tokens / 4.0
