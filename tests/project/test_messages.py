"""What the user reads: one line with the fix for a wrong file, the exclusion table when nothing is
admitted, no citation of files the user lacks, one number style, short reprs."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import openrouter_probe
from openrouter_probe.analysis.budget import plan_budget
from openrouter_probe.cli import cli
from openrouter_probe.cli._common import term_of
from openrouter_probe.errors import ConfigError, PolicyError, rendered
from openrouter_probe.policy.compiled import load_compiled_policy, load_provider_block
from openrouter_probe.policy.spec import document_kind, load_spec, read_yaml
from openrouter_probe.rules.precision import PrecisionRegistry
from openrouter_probe.rules.snapshot import bundled_snapshot
from tests.conftest import DATA, ROOT

MODEL = "moonshotai/kimi-k2.5"
SPEC = "policies/kimi-k2.5.spec.yaml"
POLICY = "policies/kimi-k2.5.yaml"
COMPILE_IT = (
    f"{SPEC}: this is a policy spec, not {{what}}: compile it first with "
    f"`openrouter-probe policy compile {SPEC} {{offline}}-o {POLICY}`"
)


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the paths in the messages are the ones typed


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


# -- a spec where a compiled policy is wanted, and the reverse ------------------------------------


def test_document_kind() -> None:
    assert document_kind(read_yaml(SPEC)) == "spec"
    assert document_kind(read_yaml(POLICY)) == "compiled"
    assert document_kind({"order": ["chutes"], "allow_fallbacks": False}) == "block"
    assert document_kind({"provider": {"order": ["chutes"]}}) == "block"
    assert document_kind(["a"]) == "other"


#: The compile step as a Python caller takes it.
COMPILE_IN_PYTHON = f'`orp.compile_policy(orp.load_spec("{SPEC}"), SNAPSHOT).save("{POLICY}")`'


def test_library_loaders_say_it_in_one_line() -> None:
    """The library says the step as a Python call; the CLI says it as its command line
    (``test_every_command_that_takes_a_policy_detects_a_spec``)."""
    compile_cli = cli.commands["policy"].commands["compile"]  # type: ignore[attr-defined]
    with pytest.raises(PolicyError) as info:
        load_compiled_policy(SPEC)
    message = info.value.args[0].values["reason"]
    assert (message.code, message.values) == (
        "policy-is-spec",
        {"wanted": "a compiled policy", "spec": SPEC, "output": POLICY},
    )
    assert str(info.value) == (
        f"{SPEC}: this is a policy spec, not a compiled policy: compile it first with "
        f"{COMPILE_IN_PYTHON}"
    )
    assert rendered(info.value, term_of(compile_cli)) == COMPILE_IT.format(
        what="a compiled policy", offline=""
    )
    with pytest.raises(PolicyError) as info:
        load_provider_block(SPEC)
    assert rendered(info.value, term_of(compile_cli)) == COMPILE_IT.format(
        what="a provider block", offline=""
    )
    with pytest.raises(PolicyError) as info:
        load_spec(POLICY)
    assert str(info.value) == (
        f"{POLICY}: this is a compiled policy, not a policy spec: compile its spec instead: "
        f"{COMPILE_IN_PYTHON}"
    )
    assert rendered(info.value, term_of(compile_cli)) == (
        f"{POLICY}: this is a compiled policy, not a policy spec: compile its spec instead: "
        f"`openrouter-probe policy compile {SPEC} -o {POLICY}`"
    )


@pytest.mark.parametrize(
    ("args", "code", "what"),
    [
        (["policy", "check", SPEC, "--offline"], 2, "a compiled policy"),
        (["policy", "lint", SPEC, "--offline"], 1, "a provider block"),
        (
            [
                "budget",
                MODEL,
                "--offline",
                "--budget-usd",
                "100",
                "--output-tokens",
                "60M",
                "--policy",
                SPEC,
            ],
            1,
            "a compiled policy",
        ),
    ],
)
def test_every_command_that_takes_a_policy_detects_a_spec(
    args: list[str], code: int, what: str
) -> None:
    exit_code, _, stderr = _invoke(*args)
    assert exit_code == code
    errors = [line for line in stderr.splitlines() if line.startswith("Error")]
    # offline, so the compile it suggests is offline too (issue 18)
    assert errors == [f"Error: {COMPILE_IT.format(what=what, offline='--offline ')}"]


def test_compile_detects_a_compiled_policy() -> None:
    exit_code, _, stderr = _invoke("policy", "compile", POLICY, "--offline")
    assert exit_code == 1
    assert stderr.strip() == (
        f"Error: {POLICY}: this is a compiled policy, not a policy spec: compile its spec "
        f"instead: `openrouter-probe policy compile {SPEC} --offline -o {POLICY}`"
    )


def test_a_bare_block_where_a_compiled_policy_or_a_spec_is_wanted(tmp_path: Path) -> None:
    block = tmp_path / "block.yaml"
    block.write_text("order: [chutes/int4]\nallow_fallbacks: false\n")
    with pytest.raises(PolicyError, match=r"bare provider block, not a compiled policy.*lint it"):
        load_compiled_policy(block)
    with pytest.raises(PolicyError) as info:
        load_spec(block)
    assert str(info.value) == (
        f"{block}: this is a provider block, not a policy spec: lint it with "
        "`orp.lint_block(BLOCK, orp.probe(MODEL).endpoints, model=MODEL)`, or write a spec with "
        "model: and precision: (docs/policy.md) and compile that"
    )
    lint = cli.commands["policy"].commands["lint"]  # type: ignore[attr-defined]
    assert rendered(info.value, term_of(lint)) == (
        f"{block}: this is a provider block, not a policy spec: lint it with "
        f"`openrouter-probe policy lint {block} --model MODEL`, or write a spec with model: and "
        "precision: (docs/policy.md) and compile that"
    )


# -- explain when nothing is admitted -------------------------------------------------------------


def test_explain_shows_why_when_nothing_is_admitted() -> None:
    spec = DATA / "policies" / "invalid" / "admits-nothing.spec.yaml"
    exit_code, stdout, stderr = _invoke("policy", "explain", str(spec), "--offline")
    assert exit_code == 1
    assert f"{MODEL}: 0 of 11 endpoints admitted" in stdout
    assert stdout.count("dropped") >= 11
    assert "dropped: quantization" in stdout
    assert stderr.splitlines()[-1] == (
        f"Error: {spec}: the policy admits none of the 11 endpoints of {MODEL}; relax "
        "precision, ignore or max_price (the table says why each one is dropped)"
    )


def test_explain_json_of_an_empty_policy_is_still_written() -> None:
    spec = DATA / "policies" / "invalid" / "admits-nothing.spec.yaml"
    exit_code, stdout, _ = _invoke("policy", "explain", str(spec), "--offline", "--format", "json")
    assert exit_code == 1
    doc = json.loads(stdout)
    assert len(doc["decisions"]) == 11 and not any(d["kept"] for d in doc["decisions"])


def test_compile_names_explain_with_the_spec_when_nothing_is_admitted() -> None:
    spec = DATA / "policies" / "invalid" / "admits-nothing.spec.yaml"
    exit_code, _, stderr = _invoke("policy", "compile", str(spec), "--offline")
    assert exit_code == 1
    # the explain it suggests gets its snapshot as the compile did (offline)
    assert f"`openrouter-probe policy explain {spec} --offline` shows why each one" in stderr


# -- a malformed precision file -------------------------------------------------------------------


def test_a_malformed_precision_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "mine.yaml"
    bad.write_text('models:\n  - match: "x/*"\n    native: int4\n   source: bad\n')
    with pytest.raises(ConfigError) as info:
        PrecisionRegistry.load(bad)
    assert str(info.value) == (
        f"{bad}:4:4: not valid YAML (expected <block end>, but found '<block mapping start>'); "
        "fix that line (the bundled openrouter_probe/data/precision.yaml shows the format)"
    )
    exit_code, _, stderr = _invoke(
        "policy", "compile", SPEC, "--offline", "--precision-file", str(bad)
    )
    assert exit_code == 1
    assert [line for line in stderr.splitlines() if line.startswith("Error")] == [
        f"Error: {info.value}"
    ]


# -- no citation of files the user does not have --------------------------------------------------


def _user_strings(path: Path) -> list[str]:
    """String constants of a module that are not docstrings (messages, data)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


def test_no_message_or_bundled_data_cites_files_users_lack() -> None:
    package = Path(openrouter_probe.__file__).parent
    found = []
    for path in sorted(package.rglob("*")):
        if path.suffix == ".py":
            texts = _user_strings(path)
        elif path.suffix in (".json", ".yaml"):
            texts = [
                line
                for line in path.read_text(encoding="utf-8").splitlines()
                if not line.lstrip().startswith("#")
            ]
        else:
            continue
        found += [
            f"{path.name}: {t[:80]}"
            for t in texts
            if "OPENROUTER.md" in t or "shared/" in t or "scenarios/" in t
        ]
    assert found == []


# -- numbers and reprs ----------------------------------------------------------------------------


def _floats(value: object) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for v in value.values() for f in _floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in _floats(v)]
    return []


def test_json_floats_carry_no_binary_noise() -> None:
    args = ["budget", MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "60M"]
    exit_code, stdout, _ = _invoke(*args, "--format", "json", "--datasets", "7")
    assert exit_code == 0
    doc = json.loads(stdout)
    assert all(len(repr(f).replace("-", "").lstrip("0.")) <= 12 for f in _floats(doc))
    weights = [e["weight"] for e in doc["endpoints"]]
    assert all(round(w, 4) == w for w in weights) and abs(sum(weights) - 1) < 0.001
    policy = json.loads(_invoke("policy", "explain", POLICY, "--format", "json")[1])
    assert policy["decisions"][0]["share"] == 0.984


def test_budget_rejects_a_reversed_share() -> None:
    args = ["budget", MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "60M"]
    exit_code, _, stderr = _invoke(*args, "--reasoning-share", "0.9:0.1")
    assert exit_code == 2  # a usage error (issue 26)
    assert "reversed range; write the low share first: 0.1:0.9" in stderr


def test_budget_text_without_a_share_and_with_the_prompt_size() -> None:
    args = ["budget", MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "60M"]
    _, stdout, _ = _invoke(*args, "--prompt-tokens", "2000", "--output-tokens-per-request", "1000")
    stdout = stdout.replace("\n  ", " ")  # the prose wraps to the table's width (80 piped)
    assert "0%-0%" not in stdout
    assert "(no --reasoning-share given: all of it counted as visible)" in stdout
    headline = stdout.splitlines()[0]
    assert headline.endswith(
        "; all-in with the prompts ($3.10 per million output tokens) the target costs $186.00 "
        "and $100.00 buys 32.26M output tokens"
    )
    _, stdout, _ = _invoke(*args, "--reasoning-share", "0.6")
    stdout = stdout.replace("\n  ", " ")
    assert "at 60% reasoning that is 24M visible" in stdout
    assert "$2.61/M output" in stdout  # the blend, in the house style (not $2.607/M)


def test_short_reprs_and_a_jupyter_table() -> None:
    snap = bundled_snapshot()
    assert repr(snap) == (
        "<Snapshot moonshotai/kimi-k2.5: 11 endpoints from bundled, 2026-02-01T00:00:00Z, "
        "sha256:a647eec5…>"
    )
    html = snap._repr_html_()
    assert html.count("<tr>") == 12 and "<td>chutes/int4</td><td>Chutes</td>" in html
    assert "<td>$2.20/M</td>" in html
    plan = plan_budget(snap, budget_usd=100, output_tokens="60M")
    assert repr(plan) == (
        "<BudgetPlan moonshotai/kimi-k2.5: 60M output tokens, $100.00 budget, 11 endpoints; "
        "cheapest chutes/int4 $2.20/M costs $132.00>"
    )


def test_snapshot_args_is_ignored_with_a_deprecation_warning() -> None:
    """Up to 0.2.x callers passed the CLI's snapshot flags for the commands an error suggested;
    the library names no flag now, and the CLI repeats its own (``--offline`` above)."""
    with pytest.warns(DeprecationWarning, match="snapshot_args is ignored"):
        load_spec(SPEC, snapshot_args=["--offline"])
    with (
        pytest.warns(DeprecationWarning, match="snapshot_args"),
        pytest.raises(PolicyError) as info,
    ):
        load_compiled_policy(SPEC, snapshot_args=["--offline"])
    assert "--offline" not in str(info.value)


def test_policy_check_repeats_the_snapshot_and_spec_it_was_given(tmp_path: Path) -> None:
    """The fix a drift report ends with is the command line of the run that found it."""
    spec = tmp_path / "k.spec.yaml"
    spec.write_text((ROOT / SPEC).read_text() + "allow: [chutes/int4]\n")
    policy = tmp_path / "k.yaml"
    exit_code, _, stderr = _invoke("policy", "compile", str(spec), "--offline", "-o", str(policy))
    assert exit_code == 0, stderr
    snap = json.loads((ROOT / "openrouter_probe/data/kimi-k2.5.snapshot.json").read_text())
    endpoints = snap["data"]["endpoints"]
    endpoints[:] = [e for e in endpoints if e["tag"] != "chutes/int4"]
    fresh = tmp_path / "fresh.json"
    fresh.write_text(json.dumps(snap))
    exit_code, stdout, _ = _invoke(
        "policy", "check", str(policy), "--snapshot", str(fresh), "--spec", str(spec)
    )
    assert exit_code == 1
    assert stdout.splitlines()[-1].endswith(
        f"then run openrouter-probe policy check {policy} --snapshot {fresh} --spec {spec} --write"
    )
