"""Every edge a new user touches, end to end through the CLI on the fake OpenRouter.

Each test runs the commands as a user does (``openrouter-probe generate|audit|export ...`` in
process, against ``fake.serve(speed=0)`` on loopback) and asserts the exact line the user reads,
its exit code and what is (or is not) left on disk: one clear line naming the file and line and
what to do, never a traceback, and nothing lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from openrouter_probe.cli import cli
from openrouter_probe.cli.hooks import hooks as hooks_cli
from openrouter_probe.errors import PolicyError, SnapshotError
from openrouter_probe.fake import FakeServer, serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.prompts import shard_of
from openrouter_probe.policy.compiler import compile_policy
from openrouter_probe.policy.spec import load_spec
from openrouter_probe.rules.snapshot import bundled_snapshot, load_snapshot
from tests._generate import POLICY, records, write_prompts
from tests.conftest import PYTEST_OPENROUTER_KEY, ROOT


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with serve(speed=0, seed=18) as server:
        yield server


def _invoke(fake: FakeServer, *args: str | Path) -> Result:
    env = {"OPENROUTER_BASE_URL": fake.base_url, "OPENROUTER_API_KEY": PYTEST_OPENROUTER_KEY}
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


def _generate(fake: FakeServer, prompts: Path, out: Path, *extra: str) -> Result:
    cap = () if "--budget-usd" in extra else ("--no-budget",)  # the fake's key has no limit
    return _invoke(
        fake, "generate", prompts, "--policy", POLICY, "--out", out, "--max-tokens", "40",
        "--quiet", *cap, *extra,
    )  # fmt: skip


def _last_line(result: Result) -> str:
    """The error line a user reads: the last of stderr, with no traceback before it."""
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def _rows(n: int) -> list[dict[str, str]]:
    return [{"id": f"r{i}", "prompt": f"question {i}"} for i in range(n)]


# -- the prompts file ---------------------------------------------------------------------------


def test_a_prompts_file_with_a_utf8_bom_is_read(fake: FakeServer, tmp_path: Path) -> None:
    plain = write_prompts(tmp_path / "plain.jsonl", _rows(3))
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    result = _generate(fake, bom, tmp_path / "out.jsonl")
    assert result.exit_code == 0, result.output
    out = records(tmp_path / "out.jsonl")
    assert sorted(r["id"] for r in out) == ["r0", "r1", "r2"]
    assert {r["status"] for r in out} <= {"ok", "truncated"}
    assert {r["messages"][0]["content"] for r in out if r["id"] == "r0"} == {"question 0"}
    assert [e.provider for e in fake.ledger.entries] == ["Chutes"] * 3


@pytest.mark.parametrize("text", ["", "\n  \n\n"], ids=["empty", "blank-lines"])
def test_an_empty_prompts_file_is_one_line_and_creates_nothing(
    fake: FakeServer, tmp_path: Path, text: str
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(text)
    result = _generate(fake, prompts, tmp_path / "out.jsonl")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {prompts}: no rows, the file is empty; write one JSON object per line with "
        '`messages` or `prompt`, e.g. {"id": "q1", "prompt": "Hello"}\n'
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prompts.jsonl"]
    assert len(fake.ledger) == 0


def test_a_shard_that_gets_no_row_sends_nothing_and_creates_nothing(
    fake: FakeServer, tmp_path: Path
) -> None:
    """Chosen: an empty shard is not an error (a script runs every shard of a small file), but it
    says so in one line, ends `done` (exit 0) and leaves no empty output and journal behind."""
    prompts = write_prompts(tmp_path / "prompts.jsonl", _rows(1))
    other = (shard_of("r0", 4) + 1) % 4
    result = _generate(fake, prompts, tmp_path / "out.jsonl", "--shard", f"{other}/4")
    assert result.exit_code == 0
    assert f"{prompts}: shard {other}/4 gets none of the file's 1 rows: nothing to send" in (
        result.stderr.splitlines()
    )
    assert "stopped: done" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prompts.jsonl"]
    assert len(fake.ledger) == 0


def test_duplicate_ids_name_both_lines_in_a_dry_run_too(fake: FakeServer, tmp_path: Path) -> None:
    rows = [*_rows(3), {"id": "r1", "prompt": "question 1 again"}]
    prompts = write_prompts(tmp_path / "prompts.jsonl", rows)
    result = _generate(fake, prompts, tmp_path / "out.jsonl", "--dry-run", "--budget-usd", "1")
    assert result.exit_code == 0, result.output
    assert f"{prompts}:4: id 'r1' already on line 2; sent once" in result.stderr.splitlines()
    assert "1 duplicate ids skipped" in result.stdout
    real = _generate(fake, prompts, tmp_path / "out.jsonl", "--budget-usd", "1")
    assert real.stderr.splitlines().count(f"{prompts}:4: id 'r1' already on line 2; sent once") == 1
    assert sorted(r["id"] for r in records(tmp_path / "out.jsonl")) == ["r0", "r1", "r2"]


# -- the output file and its journal, damaged ----------------------------------------------------


def _finished_output(fake: FakeServer, tmp_path: Path, n: int = 4) -> tuple[Path, Path]:
    prompts = write_prompts(tmp_path / "prompts.jsonl", _rows(n))
    out = tmp_path / "out.jsonl"
    assert _generate(fake, prompts, out).exit_code == 0
    return prompts, out


def _damage(path: Path, line: int, make: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[line - 1] = make
    path.write_bytes(b"".join(lines))


OUTPUT_ADVICE = (
    "is this the output file of `generate`? If it is, the line is damaged: "
    "restore the file, or remove that line (its row is then sent again)"
)
JOURNAL_ADVICE = (
    "the file is damaged. Restore it, or delete it: the output's records then count at their "
    "worst case until /generation settles them"
)


def test_a_non_utf8_byte_in_the_output_is_one_line_in_generate_and_audit(
    fake: FakeServer, tmp_path: Path
) -> None:
    prompts, out = _finished_output(fake, tmp_path)
    original = out.read_bytes().splitlines(keepends=True)[1]
    _damage(out, 2, original[:20] + b"\xff" + original[20:])
    before = out.read_bytes()
    resumed = _generate(fake, prompts, out)
    assert resumed.exit_code == 1
    assert _last_line(resumed) == f"Error: {out}:2: not UTF-8 text; {OUTPUT_ADVICE}"
    audited = _invoke(fake, "audit", out, "--policy", POLICY, "--snapshot", "bundled")
    assert audited.exit_code == 1
    assert _last_line(audited) == f"Error: {out}:2: not UTF-8 text; {OUTPUT_ADVICE}"
    assert out.read_bytes() == before  # nothing lost, nothing rewritten
    assert len(fake.ledger) == 4  # the resume sent nothing


def test_a_non_utf8_byte_in_the_journal_is_one_line_in_generate_and_audit(
    fake: FakeServer, tmp_path: Path
) -> None:
    prompts, out = _finished_output(fake, tmp_path)
    journal = out.with_name(out.name + ".ledger")
    _damage(journal, 2, b'{"sent":1,"run":"\xfe\xff","id":"r0","reserved_usd":"0.1"}\n')
    resumed = _generate(fake, prompts, out)
    assert resumed.exit_code == 1
    assert _last_line(resumed) == f"Error: {journal}:2: not UTF-8 text; {JOURNAL_ADVICE}"
    audited = _invoke(fake, "audit", out, "--policy", POLICY, "--snapshot", "bundled")
    assert audited.exit_code == 1  # audit reads the journal too: the money it holds
    assert _last_line(audited) == f"Error: {journal}:2: not UTF-8 text; {JOURNAL_ADVICE}"
    assert len(fake.ledger) == 4


def test_a_damaged_middle_line_says_what_to_do_in_generate_audit_and_export(
    fake: FakeServer, tmp_path: Path
) -> None:
    prompts, out = _finished_output(fake, tmp_path)
    _damage(out, 2, b'{"id": "r1", "status": "ok", "content": "cut here\n')
    expected = (
        f"Error: {out}:2: not a generator output line (Invalid control character at "
        f"column 50); {OUTPUT_ADVICE}"
    )
    resumed = _generate(fake, prompts, out)
    assert (resumed.exit_code, _last_line(resumed)) == (1, expected)
    audited = _invoke(fake, "audit", out, "--policy", POLICY, "--snapshot", "bundled")
    assert (audited.exit_code, _last_line(audited)) == (1, expected)
    train = tmp_path / "train.jsonl"
    exported = _invoke(fake, "export", out, "-o", train)
    assert (exported.exit_code, _last_line(exported)) == (1, expected)
    assert not train.exists()
    assert len(fake.ledger) == 4


# -- a snapshot of another model -----------------------------------------------------------------

OTHER = ROOT / "examples" / "policies" / "deepseek-v3.2.snapshot.json"
MISMATCH = (
    f"model mismatch: {OTHER} holds deepseek/deepseek-v3.2, not moonshotai/kimi-k2.5; pass a "
    "snapshot of moonshotai/kimi-k2.5 (save one with "
    "`openrouter-probe endpoints moonshotai/kimi-k2.5 --save PATH`)"
)
#: The same, as the library says it: the step a Python caller takes (``errors.ADVICE``).
MISMATCH_LIBRARY = MISMATCH.replace(
    "`openrouter-probe endpoints moonshotai/kimi-k2.5 --save PATH`",
    '`orp.probe("moonshotai/kimi-k2.5").save(PATH)`',
)


def test_a_snapshot_of_another_model_is_a_model_mismatch_everywhere(
    fake: FakeServer, tmp_path: Path
) -> None:
    """Every command that loads a snapshot for a model says so with both ids; generate said its
    policy "admits none of the 8 endpoints serving moonshotai/kimi-k2.5 now" (DeepSeek's)."""
    prompts = write_prompts(tmp_path / "prompts.jsonl", _rows(2))
    out = tmp_path / "out.jsonl"
    spec = ROOT / "policies" / "kimi-k2.5.spec.yaml"
    commands = [
        ["generate", prompts, "--policy", POLICY, "--out", out, "--snapshot", OTHER, "--dry-run"],
        ["generate", prompts, "--policy", POLICY, "--out", out, "--snapshot", OTHER],
        ["audit", prompts, "--policy", POLICY, "--snapshot", OTHER],
        ["policy", "compile", spec, "--snapshot", OTHER],
        ["policy", "check", POLICY, "--snapshot", OTHER],
        ["policy", "lint", POLICY, "--snapshot", OTHER],
        ["budget", "moonshotai/kimi-k2.5", "--snapshot", OTHER, "--budget-usd", "100",
         "--output-tokens", "1M"],
        ["matrix", "moonshotai/kimi-k2.5", "--offline", "--history", OTHER],
        ["verify", "moonshotai/kimi-k2.5", "--snapshot", OTHER, "--dry-run"],
    ]  # fmt: skip
    for command in commands:
        result = _invoke(fake, *command)
        assert result.exit_code in (1, 2), (command, result.output)
        assert _last_line(result) == f"Error: {MISMATCH}", command
    assert not out.exists() and len(fake.ledger) == 0
    hooks = CliRunner().invoke(hooks_cli, ["compile", "--snapshot", str(OTHER), str(spec)])
    assert (hooks.exit_code, hooks.output) == (1, f"Error: {MISMATCH}\n")


def test_the_library_refuses_a_loaded_snapshot_of_another_model(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", _rows(2))
    other = load_snapshot(OTHER)
    with pytest.raises(SnapshotError) as info:
        asyncio.run(
            generate(prompts, policy=POLICY, out=tmp_path / "out.jsonl", snapshot=other,
                     dry_run=True)
        )  # fmt: skip
    assert str(info.value) == MISMATCH_LIBRARY.replace(str(OTHER), other.origin)
    spec = load_spec(ROOT / "policies" / "kimi-k2.5.spec.yaml")
    with pytest.raises(PolicyError, match=r"model mismatch: .* holds deepseek/deepseek-v3\.2, "):
        compile_policy(spec, other)


# -- the compile command an error suggests ----------------------------------------------------------

SPEC = ROOT / "policies" / "kimi-k2.5.spec.yaml"
COMPILED = ROOT / "policies" / "kimi-k2.5.yaml"


@pytest.mark.parametrize("how", ["--offline", "--snapshot bundled", "--snapshot PATH"])
def test_the_compile_command_suggested_repeats_how_the_user_got_a_snapshot(
    fake: FakeServer, tmp_path: Path, how: str
) -> None:
    """Issue 18: offline, the spec-vs-policy message suggested a compile that needs the network."""
    saved = bundled_snapshot().save(tmp_path / "k25.json")
    given = how.replace("PATH", str(saved)).split()
    repeated = f"--snapshot {saved} " if "PATH" in how else "--offline "
    prompts = write_prompts(tmp_path / "prompts.jsonl", _rows(1))
    spec_given = (
        f"Error: {SPEC}: this is a policy spec, not a compiled policy: compile it first with "
        f"`openrouter-probe policy compile {SPEC} {repeated}-o {COMPILED}`"
    )
    commands = [
        ["audit", prompts, "--policy", SPEC, *given],
        ["policy", "check", SPEC, *given],
        ["budget", "moonshotai/kimi-k2.5", "--policy", SPEC, *given, "--budget-usd", "100",
         "--output-tokens", "1M"],
    ]  # fmt: skip
    if "PATH" not in how:  # verify loads the file before it reads the policy: the path is lost
        commands.append(["verify", "moonshotai/kimi-k2.5", "--policy", SPEC, *given, "--dry-run"])
    if given[0] == "--snapshot":  # generate's only way to work offline
        commands.append(
            ["generate", prompts, "--policy", SPEC, "--out", tmp_path / "o.jsonl", *given]
        )
    for command in commands:
        result = _invoke(fake, *command)
        assert result.exit_code in (1, 2), command  # policy check: 2 on an error
        assert _last_line(result) == spec_given, command
    lint = _invoke(fake, "policy", "lint", SPEC, *given)
    assert _last_line(lint) == spec_given.replace("not a compiled policy", "not a provider block")
    compiled_given = _invoke(fake, "policy", "compile", COMPILED, *given)
    assert _last_line(compiled_given) == (
        f"Error: {COMPILED}: this is a compiled policy, not a policy spec: compile its spec "
        f"instead: `openrouter-probe policy compile {SPEC} {repeated}-o {COMPILED}`"
    )
    assert not (tmp_path / "o.jsonl").exists() and len(fake.ledger) == 0


def test_online_the_suggested_compile_probes_as_the_user_did(
    fake: FakeServer, tmp_path: Path
) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", _rows(1))
    result = _invoke(fake, "audit", prompts, "--policy", SPEC)
    assert _last_line(result) == (
        f"Error: {SPEC}: this is a policy spec, not a compiled policy: compile it first with "
        f"`openrouter-probe policy compile {SPEC} -o {COMPILED}`"
    )


def test_a_prompts_line_that_is_not_json_names_the_column_in_that_line(tmp_path: Path) -> None:
    """Review of 0.2.0: `bad.jsonl:2: not JSON (Expecting value: line 2 column 1 (char 22))`
    read as a second line number; the column in the file's line is what helps."""
    from openrouter_probe.errors import ConfigError
    from openrouter_probe.generation.prompts import read_prompts

    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "prompt": "hi"}\n{"id": "b", "prompt": \n{"id" "c"}\n')
    with pytest.raises(ConfigError) as info:
        read_prompts(path, strict=True)
    text = str(info.value)
    assert f"{path.name}:2: not JSON (Expecting value at column 24)" in text
    assert f"{path.name}:3: not JSON (Expecting ':' delimiter at column 7)" in text
    assert "line 2 column" not in text and "(char " not in text
