"""What a one-row ``generate`` loads and does before its first request: the modules it imports
(each a share of its CPU, ``benchmarks/startup.py --generate``), the collector held off until it
sends, pydantic's plugins not looked for. Run in a fresh interpreter, as a user's command is,
against the fake; a module listed here comes in only through a path the run does not take."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from openrouter_probe.fake import serve
from tests._generate import POLICY
from tests.conftest import PYTEST_OPENROUTER_KEY

#: Modules a one-row run with its progress on a file has no use for.
NOT_IMPORTED = ("rich", "pandas", "matplotlib", "bs4", "html", "difflib")
#: The package's modules a one-row sync run (no dry run, batch, pilot, shard, precision lint,
#: sampling mix or redo) has no use for: each is dataclasses and tables built for nothing.
NOT_IMPORTED_HERE = (
    *(  # the other commands' modules (``cli._common.COMMANDS``)
        f"openrouter_probe.cli.{name}"
        for name in ("analysis", "fake", "keys", "matrix", "outputs", "policy", "probe", "verify")
    ),
    "openrouter_probe.cli.tables",
    "openrouter_probe.api.listings",  # GET /models and /providers: a run reads endpoints only
    "openrouter_probe.api.error_rules",  # the error table: read on the first failure
    "openrouter_probe.generation.dry_run",
    "openrouter_probe.generation.pilot",
    "openrouter_probe.generation.records",
    "openrouter_probe.generation.shards",
    "openrouter_probe.rules.precision",
    "openrouter_probe.rules.batch",
    "openrouter_probe.rules.sampling_mix",
    "openrouter_probe.run.books.batch_books",
    "openrouter_probe.run.send.batch_plan",
)

_RUN = """
import gc, json, runpy, sys
frozen = []
real_freeze = gc.freeze
def freeze():
    frozen.append(gc.isenabled())
    real_freeze()
gc.freeze = freeze
sys.argv = ["openrouter-probe", *json.loads(sys.argv[1])]
try:
    runpy.run_module("openrouter_probe", run_name="__main__")
except SystemExit as exc:
    code = exc.code
loader = sys.modules.get("pydantic.plugin._loader")
scanned = loader is not None and loader._plugins is not None
print(json.dumps({"code": code, "modules": sorted(sys.modules), "frozen": frozen, "scanned": scanned}))
"""


#: What ``run.progress`` reads to choose rich's live line over the last line (``_redrawn``): a
#: CI's ``FORCE_COLOR=1`` would import rich.
_TERMINAL_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE")


@pytest.fixture(scope="module")
def said(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """What a one-row ``generate`` run in a fresh interpreter loaded and did."""
    tmp_path = tmp_path_factory.mktemp("startup")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "r0", "prompt": "what is 6 * 7?"}) + "\n")
    args = ["generate", str(prompts), "--policy", str(POLICY), "--out", str(tmp_path / "o.jsonl")]
    args += ["--budget-usd", "1", "--max-tokens", "64"]
    with serve(speed=0, seed=0) as fake:
        env = {**os.environ, "OPENROUTER_BASE_URL": fake.base_url}
        env["OPENROUTER_API_KEY"] = PYTEST_OPENROUTER_KEY
        for name in ("PYDANTIC_DISABLE_PLUGINS", *_TERMINAL_ENV):
            env.pop(name, None)
        done = subprocess.run(
            [sys.executable, "-c", _RUN, json.dumps(args)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    said: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    assert said["code"] == 0, done.stderr
    return said


def test_a_one_row_generate_imports_only_what_it_uses(said: dict[str, object]) -> None:
    modules = {str(m).partition(".")[0] for m in said["modules"]}  # type: ignore[attr-defined]
    assert "aiohttp" in modules  # it did send
    assert sorted(modules & set(NOT_IMPORTED)) == []
    loaded = {str(m) for m in said["modules"]}  # type: ignore[attr-defined]
    assert "openrouter_probe.run.send.transport" in loaded
    assert sorted(loaded & set(NOT_IMPORTED_HERE)) == []


def test_a_one_row_generate_does_not_look_for_pydantic_plugins(said: dict[str, object]) -> None:
    # the scan reads every installed package's entry points: a tenth of the run's own CPU
    assert "pydantic" in {str(m) for m in said["modules"]}  # type: ignore[attr-defined]
    assert said["scanned"] is False


def test_a_one_row_generate_freezes_its_setup_once_the_collector_was_held(
    said: dict[str, object],
) -> None:
    # the first freeze is the job's, as it starts sending, with the collector still off from the
    # command's start; the last is the interpreter's exit (not seen here: after the print)
    assert said["frozen"] == [False]
