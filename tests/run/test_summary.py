"""The run's result is a value. ``RunSummary`` is frozen; while a run is set up
its ``SummaryDraft`` (the same fields, declared once) takes what the steps before the first request
say, and the books make the summary from it once, at the end."""

from __future__ import annotations

import ast
import dataclasses
from decimal import Decimal

import pytest

from openrouter_probe.run.stop import StopReason
from openrouter_probe.run.summary import DatasetTally, RunSummary, SummaryDraft
from tests.conftest import ROOT

PACKAGE = ROOT / "openrouter_probe"

#: Where a draft becomes a summary: the books at the end of a run; a run that sends nothing (the
#: output already spent, the key blocks one request, nothing to send), a dry run, a verify run
#: with every request recorded already. Each is the whole of what that run did.
BUILDERS = {
    "run/books/books.py",
    "run/paid.py",
    "generation/dry_run.py",
    "verify/run.py",
}


def test_a_summary_is_frozen() -> None:
    summary = RunSummary(out="o.jsonl", policy="p.yaml", model="m/x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.ok = 3  # type: ignore[misc]
    later = dataclasses.replace(summary, stop_reason=StopReason.KEY_LIMIT, message="limit")
    assert (later.stop_reason, later.exit_code, summary.exit_code) == (StopReason.KEY_LIMIT, 1, 0)


def test_a_draft_has_the_summarys_fields_and_no_others() -> None:
    draft = SummaryDraft(out="o.jsonl", policy="p.yaml", model="m/x", rows_total=4)
    draft.warnings.append("w")
    draft.datasets = {"B3": DatasetTally(rows=4)}
    draft.spent_before_usd += Decimal("0.25")
    summary = draft.build()
    assert isinstance(summary, RunSummary)
    assert summary.rows_total == 4 and summary.warnings == ["w"]
    assert summary.spent_before_usd == Decimal("0.25") and summary.datasets["B3"].rows == 4
    assert {f.name for f in dataclasses.fields(RunSummary)} >= {"out", "ok", "stop_reason"}
    with pytest.raises(AttributeError, match="no field 'okay'"):
        draft.okay = 1
    with pytest.raises(AttributeError, match="no field 'okay'"):
        _ = draft.okay
    with pytest.raises(TypeError, match="no field rows"):
        SummaryDraft(out="o", policy="p", model="m", rows=1)
    with pytest.raises(TypeError, match="needs model="):
        SummaryDraft(out="o", policy="p")
    # two drafts share no list: a default is made for each
    assert SummaryDraft(out="o", policy="p", model="m").warnings == []


#: What the package calls a summary's draft.
DRAFTS = {"summary", "draft", "s"}


def _calls(name: str, attribute: bool) -> dict[str, int]:
    """Where the package calls ``name`` (``draft.name()`` when ``attribute``), by module path."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            hit = (
                isinstance(func, ast.Attribute)
                and func.attr == name
                and isinstance(func.value, ast.Name)
                and func.value.id in DRAFTS
                if attribute
                else isinstance(func, ast.Name) and func.id == name
            )
            if hit:
                where = str(path.relative_to(PACKAGE))
                found[where] = found.get(where, 0) + 1
    return found


def test_only_the_books_and_the_runs_that_send_nothing_make_a_summary() -> None:
    assert set(_calls("build", attribute=True)) == BUILDERS
    # made from a draft (its ``build``), never field by field
    assert _calls("RunSummary", attribute=False) == {"run/summary.py": 1}
    assert set(_calls("SummaryDraft", attribute=False)) == {"run/paid.py"}


def test_the_books_give_the_scheduler_its_summary_at_the_end() -> None:
    runner = (PACKAGE / "run" / "schedule" / "runner.py").read_text(encoding="utf-8")
    assert "self.books.summarize(" in runner
    tree = ast.parse(runner)
    sets = [
        ast.unparse(t)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AugAssign)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Attribute) and ast.unparse(t).startswith(("s.", "self.summary."))
    ]
    assert sets == []


def test_the_journal_is_named_journal_and_ledger_still_reads_for_one_release() -> None:
    """The client's record is the journal (issue 33 item 5: ``ledger`` is the fake's billing);
    the old attribute and JSON key still answer, the attribute with a warning, until 0.4.0."""
    summary = RunSummary(out="o.jsonl", policy="p.yaml", model="m/x", journal="o.jsonl.ledger")
    record = summary.to_dict()
    assert (record["journal"], record["ledger"]) == ("o.jsonl.ledger", "o.jsonl.ledger")
    with pytest.warns(DeprecationWarning, match=r"RunSummary\.journal.*0\.4\.0"):
        assert summary.ledger == "o.jsonl.ledger"
    assert "ledger" not in {f.name for f in dataclasses.fields(RunSummary)}
