"""Progress of a run with rich, on stderr (rich renders it in Jupyter too).

Rows done of total, output tokens, dollars spent of the cap, rate and ETA, and rows per provider.
Redrawn four times a second by the run's ticker, never per row: at 2000 requests in flight a redraw
per row would cost more CPU than the requests.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openrouter_probe.run.runner import Run

__all__ = ["RichProgress"]


class RichProgress:
    """A rich progress bar fed by the run (``row_done`` per record, ``tick`` to redraw)."""

    def __init__(self, total: int, *, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TextColumn("{task.fields[money]} {task.fields[tokens]} {task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[providers]}"),
            console=console or Console(file=sys.stderr),
            auto_refresh=False,
        )
        self._task = self._progress.add_task(
            "rows", total=total, money="", tokens="", rate="", providers=""
        )
        self._done = 0

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.refresh()
        self._progress.stop()

    def row_done(self, record: dict[str, Any], run: Run) -> None:
        self._done += 1

    def tick(self, run: Run) -> None:
        s = run.summary
        cap = run.cap.cap_usd
        money = f"${run.cap.spent_usd:,.4f}" + (f" / ${cap:,.2f}" if cap is not None else "")
        tokens = sum(s.output_tokens.values())
        elapsed = max(1e-9, run.clock() - run.started)
        top = sorted(s.providers.items(), key=lambda kv: -kv[1].rows)[:4]
        self._progress.update(
            self._task,
            completed=self._done,
            money=money,
            tokens=f"{tokens:,} tok",
            rate=f"{self._done / elapsed:,.1f}/s {run.in_flight} in flight",
            providers=" ".join(f"{name}:{t.rows}" for name, t in top),
        )
        self._progress.refresh()
