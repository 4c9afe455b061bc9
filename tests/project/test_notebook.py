"""The budget notebook runs top to bottom without network or key, and shows the scenario's figures.

It is committed without outputs and built by ``notebooks/make_notebook.py``: both are checked here.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import struct

import pytest

from tests.conftest import ROOT

NOTEBOOK = ROOT / "notebooks" / "budget_analysis.ipynb"

pytestmark = pytest.mark.notebook


def _kernel_name() -> str:
    """``python3``; if no spec of that name is installed, jupyter_client falls back to the native
    kernel (this interpreter, through ipykernel), which is what we want anyway."""
    from jupyter_client.kernelspec import KernelSpecManager

    manager = KernelSpecManager()
    manager.get_kernel_spec("python3")  # raises NoSuchKernel when neither exists
    return "python3"


def test_notebook_is_committed_without_outputs() -> None:
    doc = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert doc["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in doc["cells"] if c["cell_type"] == "code"]
    assert code, "the notebook has code cells"
    for cell in code:
        assert cell["outputs"] == [] and cell["execution_count"] is None


def test_notebook_matches_its_builder() -> None:
    spec = importlib.util.spec_from_file_location(
        "make_notebook", NOTEBOOK.parent / "make_notebook.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import nbformat

    built = module.build()
    committed = nbformat.read(NOTEBOOK, as_version=4)
    assert [c.source for c in committed.cells] == [c.source for c in built.cells], (
        "notebooks/budget_analysis.ipynb is stale: run python notebooks/make_notebook.py"
    )


def test_notebook_runs_and_shows_the_scenario() -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name=_kernel_name(),
        timeout=60,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    texts: list[str] = []
    images = 0
    pngs: list[bytes] = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.outputs:
            assert out.output_type != "error", f"{out.get('ename')}: {out.get('evalue')}"
            if out.output_type == "stream":
                texts.append(out.text)
            elif "data" in out:
                texts.append(out["data"].get("text/plain", ""))
                if "image/png" in out["data"]:
                    images += 1
                    pngs.append(base64.b64decode(out["data"]["image/png"]))
    text = "\n".join(texts)
    assert "Reconstructed, not a live capture" in text
    assert "cost $132.00, 32% over the $100.00 budget" in text
    assert "45.45M output tokens, 7.58M per dataset over 6" in text
    assert "9.09M (80% reasoning) to 22.73M (50% reasoning)" in text
    assert "requantized" in text and "undeclared" in text
    assert "routing mode: ordered" in text
    assert "ignored by 'baseten'" in text
    assert "$2.2008/M output" in text
    assert images == 2  # price against uptime, cost against tokens
    # The rehearsal on the fake server: a dry run, then a capped run whose spend is the ledger's.
    assert "dry run: 40 rows to send" in text
    ledger = re.search(r"the fake's ledger: \$([0-9.]+); recorded: \$([0-9.]+)", text)
    assert ledger is not None and ledger.group(1) == ledger.group(2)
    assert 0 < float(ledger.group(1)) <= 0.02
    # The plots are real PNGs: price against uptime (8 x 5 in), then the budget with its legend
    # below the axes (8 x 6.5 in); the marks themselves are checked in tests/analysis/test_plots.py.
    sizes = [struct.unpack(">II", png[16:24]) for png in pngs]
    assert all(png[:8] == b"\x89PNG\r\n\x1a\n" for png in pngs)
    assert sizes[0][0] > sizes[0][1] and sizes[1][1] > sizes[0][1], sizes
    assert "<Figure size 800x500 with 1 Axes>" in text
    assert "<Figure size 800x650 with 1 Axes>" in text
    # The verify table on the fake: the degraded endpoint differs, the healthy one is consistent.
    assert "moonshotai/kimi-k2.5 against moonshotai/int4: 100 prompts (arith)" in text
    assert re.search(r"chutes/int4\s+consistent\s+100\s+100\.0\s+\+0\.0\s", text)
    assert re.search(r"deepinfra/int4\s+differs\s+100\s+85\.0\s+\+15\.0\s", text)
    assert "sent 400 request(s)" in text  # 100 each, the reference twice
    frame = re.search(r"deepinfra/int4\s+compared\s+differs\s+100\s+0\.85\s+0\.15\s", text)
    assert frame is not None, "the report's frame shows deepinfra/int4 as differs"
