"""Measure `import openrouter_probe` and `openrouter-probe --help` against a bare interpreter, and
the CPU of a one-row `generate`.

Each command runs N times in a fresh process, interleaved with the baseline (``python -c pass``) so
that machine noise hits both alike. Prints the median wall time of each and the ratio to the baseline,
plus the time *added* over the baseline, which is what the 0.3 s target is about.

``--generate N``: N runs of ``python -m openrouter_probe generate`` on a one-row prompts file against
the fake OpenRouter (served in this process, ``speed=0``), each a fresh output; the median CPU (user +
system) of the whole process, interpreter start and imports included, and its wall time, beside a
bare ``python -c "import aiohttp"`` (what any client of the run's transport pays). Bytecode is
cached as an installed package has it (a first run, not counted, writes it under a temporary
``PYTHONPYCACHEPREFIX``): compiling the package's sources is not what a user's run pays. Target (issue 47):
under 0.25 s of CPU in all. This checkout's ``openrouter_probe`` (``PYTHONPATH``).

``--instructions``: the same one-row ``generate`` (and ``import aiohttp`` beside it) once each under
valgrind's callgrind, printing the instructions executed: stable to about 0.5% from run to run where
CPU seconds on a shared machine are not, so a change's effect is measurable; ``--against DIR`` adds
another checkout's ``generate`` as ``before``.

    python benchmarks/startup.py [--runs 21] [--generate 7] [--instructions [--against DIR]]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.3
GENERATE_CPU_S = 0.25
ROOT = Path(__file__).resolve().parents[1]


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _cpu(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The CPU (user + system) and wall time of ``cmd``, whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed:\n{proc.stderr[-3000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def _instructions(cmd: list[str], env: dict[str, str]) -> int:
    """The instructions ``cmd`` executes, whole process, counted by callgrind."""
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    proc = subprocess.run([*valgrind, *cmd], env=env, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{cmd[:4]} under valgrind failed:\n{proc.stderr[-3000:]}")
    return int(found.group(1))


def _generate_cmd(root: Path, prompts: Path, out: Path) -> list[str]:
    # -P: the checkout on PYTHONPATH, not the one ``python -m`` finds in the working directory
    cmd = [sys.executable, "-P", "-m", "openrouter_probe", "generate", str(prompts)]
    cmd += ["--policy", str(root / "policies" / "kimi-k2.5.yaml"), "--out", str(out)]
    return [*cmd, "--budget-usd", "1", "--max-tokens", "64"]


def one_row_instructions(against: Path | None) -> None:
    """A one-row ``generate``'s instructions in all, against the fake (see the module)."""
    from openrouter_probe.fake import serve

    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    roots = {"generate": ROOT, **({"before": against} if against else {})}
    found: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as folder, serve(speed=0, seed=0) as fake:
        prompts = Path(folder) / "prompts.jsonl"
        prompts.write_text(json.dumps({"id": "r0", "prompt": "what is 6 * 7?"}) + "\n")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"OPENROUTER_API_KEY": "sk-or-bench-not-real", "OPENROUTER_BASE_URL": fake.base_url}
        env["PYTHONPYCACHEPREFIX"] = str(Path(folder) / "pycache")
        bare = [sys.executable, "-c", "import aiohttp"]
        subprocess.run(bare, env=env, check=True)  # its bytecode, not counted
        found["python -c 'import aiohttp'"] = _instructions(bare, env)
        for name, root in roots.items():
            here = {**env, "PYTHONPATH": str(root)}
            warm = _generate_cmd(root, prompts, Path(folder) / f"warm-{name}.jsonl")
            subprocess.run(warm, env=here, capture_output=True, check=True)  # bytecode, not counted
            cmd = _generate_cmd(root, prompts, Path(folder) / f"out-{name}.jsonl")
            found[name] = _instructions(cmd, here)
    print(f"{'one row, whole process':34} {'instructions':>15} {'x import aiohttp':>17}")
    for name, count in found.items():
        ratio = count / found["python -c 'import aiohttp'"]
        print(f"{name:34} {count:15,} {ratio:17.2f}")


def one_row_generate(runs: int) -> None:
    """A one-row ``generate``'s CPU in all, against the fake (see the module)."""
    from openrouter_probe.fake import serve

    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENROUTER_API_KEY": "sk-or-bench-not-real"}
    cases: dict[str, list[tuple[float, float]]] = {"python -c 'import aiohttp'": [], "generate": []}
    with tempfile.TemporaryDirectory() as folder, serve(speed=0, seed=0) as fake:
        prompts = Path(folder) / "prompts.jsonl"
        prompts.write_text(json.dumps({"id": "r0", "prompt": "what is 6 * 7?"}) + "\n")
        env["OPENROUTER_BASE_URL"] = fake.base_url
        # as installed: the modules' bytecode cached (written by the first run, not counted),
        # not compiled from source by every run as PYTHONDONTWRITEBYTECODE would have it
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(folder) / "pycache")
        for i in range(-1, runs):
            bare = _cpu([sys.executable, "-c", "import aiohttp"], env)
            if i >= 0:
                cases["python -c 'import aiohttp'"].append(bare)
            out = Path(folder) / f"out-{i}.jsonl"
            found = _cpu(_generate_cmd(ROOT, prompts, out), env)
            if i >= 0:
                cases["generate"].append(found)
    print(f"{'one row, whole process':34} {'CPU s':>9} {'wall s':>9}  target")
    for name, found in cases.items():
        cpu = statistics.median(c for c, _ in found)
        wall = statistics.median(w for _, w in found)
        verdict = ""
        if name == "generate":
            verdict = "ok" if cpu < GENERATE_CPU_S else f"OVER {GENERATE_CPU_S} s of CPU"
        print(f"{name:34} {cpu:9.3f} {wall:9.3f}  {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument(
        "--generate", type=int, default=0, metavar="N", help="N runs of a one-row generate"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="a one-row generate's instructions, counted by callgrind",
    )
    parser.add_argument(
        "--against", type=Path, help="with --instructions: another checkout, as 'before'"
    )
    args = parser.parse_args()
    if args.instructions:
        one_row_instructions(args.against)
        return
    if args.generate:
        one_row_generate(args.generate)
        return
    exe = shutil.which("openrouter-probe")
    cases = {
        "baseline: python -c pass": [sys.executable, "-c", "pass"],
        "import openrouter_probe": [sys.executable, "-c", "import openrouter_probe"],
        "openrouter-probe --help": [exe, "--help"]
        if exe
        else [sys.executable, "-m", "openrouter_probe", "--help"],
        "reference: import pandas": [sys.executable, "-c", "import pandas"],
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, cmd in cases.items():
            samples[name].append(_time(cmd))
    base = statistics.median(samples["baseline: python -c pass"])
    print(f"{'case':34} {'median s':>9} {'x baseline':>11} {'added s':>8}  target")
    for name, values in samples.items():
        med = statistics.median(values)
        verdict = ""
        if not name.startswith(("baseline", "reference")):
            verdict = "ok" if med < TARGET_S else f"OVER {TARGET_S}s"
        print(f"{name:34} {med:9.3f} {med / base:11.2f} {med - base:8.3f}  {verdict}")


if __name__ == "__main__":
    main()
