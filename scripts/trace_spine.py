"""Trace one ``generate`` of one row on the fake OpenRouter and print how control crosses the seam
between ``generation/`` and ``run/``.

Counts, with ``sys.setprofile`` (Python-level calls only):

- the entries into a function of ``generation/job.py`` (generator expressions and comprehensions
  included: each is a call); a coroutine's resumptions after an ``await`` are counted apart
  (``sys.setprofile`` reports each as a call);
- the calls from a frame of ``generation/job.py`` into a function of ``run/``, by callee (a
  call through the standard library counts for the package frame it came from: ``with
  open_run(...)`` enters ``open_run`` from ``contextlib``);
- every call from any module of ``generation/`` into a module of ``run/`` (the total, and by
  callee);
- the entries into a function of ``run/paid.py``;
- the verdict: of the calls from ``generation/`` into ``run/``, those that are control, i.e. not
  a value's own (a method, classmethod, ``__post_init__`` or operator of a frozen dataclass: its
  constructor or a value derived from it) and not a property read. A ``generate`` of one row
  should enter ``generation/job.py`` at most 3 times and cross into ``run/`` by control twice:
  opening the output (``open_run``) and running the job (``run_job``).

Run from a checkout: ``PYTHONPATH=$PWD python scripts/trace_spine.py``; ``tests/generation/
test_job_spine.py`` runs ``trace`` and holds the verdict.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import json
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import openrouter_probe
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate

PACKAGE = Path(openrouter_probe.__file__).resolve().parent
PACKAGE_PREFIX = str(PACKAGE) + "/"
POLICY = PACKAGE.parent / "policies" / "kimi-k2.5.yaml"
JOB = str(PACKAGE / "generation" / "job.py")
PAID = str(PACKAGE / "run" / "paid.py")
GENERATION = str(PACKAGE / "generation") + "/"
RUN = str(PACKAGE / "run") + "/"


def _name(frame: FrameType) -> str:
    code = frame.f_code
    return f"{Path(code.co_filename).relative_to(PACKAGE)}:{code.co_name}"


def _package_caller(frame: FrameType) -> str:
    """The file of the nearest frame of the package below ``frame`` (``""``: none)."""
    back = frame.f_back
    while back is not None and not back.f_code.co_filename.startswith(PACKAGE_PREFIX):
        back = back.f_back
    return back.f_code.co_filename if back is not None else ""


def _code_of(attr: object) -> object:
    """The code object of a class attribute that runs code (``None``: none)."""
    if isinstance(attr, (classmethod, staticmethod)):
        attr = attr.__func__
    if isinstance(attr, property):
        attr = attr.fget
    if isinstance(attr, functools.cached_property):
        attr = attr.func
    return getattr(attr, "__code__", None)


def value_call(frame: FrameType) -> str:
    """Why the call entering ``frame`` is a value's, not control: ``"property read"`` (a
    property's getter), ``"frozen value"`` (a method, classmethod, ``__post_init__`` or
    operator of a frozen dataclass); ``""``: control (a function, or a method of an object that
    is not a frozen value)."""
    code = frame.f_code
    if code.co_argcount == 0:
        return ""
    first = frame.f_locals.get(code.co_varnames[0])
    owner = first if isinstance(first, type) else type(first)
    for klass in owner.__mro__:
        attr = klass.__dict__.get(code.co_name)
        if attr is None or _code_of(attr) is not code:
            continue
        if isinstance(attr, (property, functools.cached_property)):
            return "property read"
        params = getattr(owner, "__dataclass_params__", None)
        return "frozen value" if params is not None and params.frozen else ""
    return ""


def trace(tmp: Path) -> dict[str, Any]:
    """Run one row through ``generate`` on the fake; return the counts."""
    prompts = tmp / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "r0", "prompt": "question 0"}) + "\n", encoding="utf-8")
    job_entries: collections.Counter[str] = collections.Counter()
    job_resumes: collections.Counter[str] = collections.Counter()
    paid_entries = paid_resumes = 0
    seen: dict[int, FrameType] = {}  # frames entered once (kept alive: their ids stay theirs)
    from_job: collections.Counter[str] = collections.Counter()
    crossings: collections.Counter[str] = collections.Counter()
    control: collections.Counter[str] = collections.Counter()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal paid_entries, paid_resumes
        if event != "call":
            return
        callee = frame.f_code.co_filename
        caller = _package_caller(frame)
        resumed = id(frame) in seen
        crossing = callee.startswith(RUN) and caller.startswith(GENERATION)
        if callee in (JOB, PAID) or crossing:
            seen[id(frame)] = frame
        if callee == JOB:
            (job_resumes if resumed else job_entries)[frame.f_code.co_name] += 1
        elif callee == PAID:
            if resumed:
                paid_resumes += 1
            else:
                paid_entries += 1
        if crossing and not resumed:
            crossings[_name(frame)] += 1
            if not value_call(frame):
                control[_name(frame)] += 1
            if caller == JOB:
                from_job[_name(frame)] += 1

    async def one_row(base_url: str) -> Any:
        sys.setprofile(profile)
        try:
            return await generate(
                prompts,
                policy=POLICY,
                out=tmp / "out.jsonl",
                base_url=base_url,
                api_key="sk-or-trace",
                budget_usd=1,
                max_tokens=50,
                concurrency=1,
            )
        finally:
            sys.setprofile(None)

    with serve(speed=0, seed=1) as fake:
        summary = asyncio.run(one_row(fake.base_url))
    assert summary.stop_reason == "done", summary.stop_reason
    return {
        "job_entries": job_entries,
        "job_resumes": job_resumes,
        "paid_entries": paid_entries,
        "paid_resumes": paid_resumes,
        "from_job": from_job,
        "crossings": crossings,
        "control": control,
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        counts = trace(Path(tmp))
    job, from_job, crossings = counts["job_entries"], counts["from_job"], counts["crossings"]
    print(f"generation/job.py entered: {sum(job.values())}")
    for name, n in job.most_common():
        print(f"  {n:3d}  {name}")
    resumes = counts["job_resumes"]
    print(f"generation/job.py coroutines resumed after an await: {sum(resumes.values())}")
    for name, n in resumes.most_common():
        print(f"  {n:3d}  {name}")
    print(f"run/paid.py entered: {counts['paid_entries']} (and resumed {counts['paid_resumes']})")
    print(f"calls generation/job.py -> run/: {sum(from_job.values())}")
    for name, n in from_job.most_common():
        print(f"  {n:3d}  {name}")
    print(f"calls generation/ -> run/ (any generation module): {sum(crossings.values())}")
    for name, n in crossings.most_common():
        print(f"  {n:3d}  {name}")
    control = counts["control"]
    print(
        f"verdict: one generate of one row enters generation/job.py {sum(job.values())} time(s) "
        f"and crosses from generation/ into run/ by {sum(control.values())} control call(s): "
        + ", ".join(f"{name} x{n}" if n > 1 else name for name, n in control.items())
        + f" (of {sum(crossings.values())} calls into run/; the others are a frozen value's own "
        "methods or property reads)"
    )


if __name__ == "__main__":
    main()
