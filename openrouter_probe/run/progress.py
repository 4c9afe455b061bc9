"""Progress of a run with rich, on stderr (rich renders it in Jupyter too).

One line, fitted to the console's width: first what matters most, rows done of total, dollars spent
of the cap and the ETA (or, once the run stopped short, why: ``stopped: budget``); then, as room allows, the rate in rows per second, output tokens, requests
in flight (and attempts being settled from ``/generation``; once OpenRouter's in-flight budget has
refused a request, the dollars held of the dollar window and the refusals), a bar, and the providers serving the
rows. At 80 columns the providers go first, then the bar. Redrawn four times a second by the run's
ticker, never per row: at 2000 requests in flight a redraw per row would cost more CPU than the
requests. Log lines (retries, warnings) print above the line while it is shown.

Where nothing redraws a line (stderr a file or a pipe: not a terminal, nor Jupyter), the run's last
line is written once as it ends (``LastLine``, what rich's live line leaves there), and rich is not
imported: a fifteenth of a one-row ``generate``'s CPU (``progress_for`` chooses).
"""

from __future__ import annotations

import builtins
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from openrouter_probe.run.stop import StopReason

if TYPE_CHECKING:
    from openrouter_probe.run.schedule.runner import Run

__all__ = ["LastLine", "RichProgress", "env_columns", "progress_for", "progress_line"]

_BAR = 20


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA -:--:--"
    s = int(seconds)
    return f"ETA {s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def progress_line(run: Run, done: int, total: int, width: int) -> str:
    """The progress line of ``run`` in at most ``width`` columns (at least the first three parts:
    rows, money, ETA)."""
    books = run.books
    cap = books.cap.cap_usd
    elapsed = max(1e-9, run.clock() - run.started)
    rate = done / elapsed
    eta = (total - done) / rate if rate > 0 else None
    money = f"${books.cap.spent_usd:,.4f}" + (f"/${cap:,.2f}" if cap is not None else "")
    # a run that stopped short (its budget, a stop) has no time left to estimate
    reason = run.waits.reason
    when = _eta(eta) if reason == StopReason.DONE else f"stopped: {reason}"
    first = [f"{done:,}/{total:,} rows", money, when]
    flying = f"{run.in_flight:,} in flight"
    if books.outstanding:
        flying += f", {books.outstanding:,} settling"
    window = run.dollars
    if window.refusals:  # OpenRouter's in-flight budget binds
        flying += (
            f" (${books.cap.held_usd:,.2f} of ${window.limit_usd or 0:,.2f} held, "
            f"{window.refusals:,} in-flight 402s)"
        )
    filled = int(_BAR * done / total) if total else _BAR
    providers = books.counts.providers
    top = sorted(providers.items(), key=lambda kv: -kv[1]["rows"])[:4]
    optional = [
        f"{rate:,.1f} rows/s",
        f"{sum(books.counts.output_tokens.values()):,} tok",
        flying,
        "━" * filled + "╺" + "─" * max(0, _BAR - filled - 1),
        " ".join(f"{name}:{t['rows']:,}" for name, t in top),
    ]
    line = "  ".join(first)
    for part in optional:
        if part and len(line) + 2 + len(part) <= width:
            line += "  " + part
    return line


class RichProgress:
    """A rich live line fed by the run (``row_done`` per record, ``tick`` to redraw)."""

    def __init__(self, total: int, *, console: Any = None) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        self._console = console or Console(file=sys.stderr)
        self._text = Text("", no_wrap=True, overflow="crop")
        self._live = Live(self._text, console=self._console, auto_refresh=False, transient=False)
        self._total = total
        self._done = 0
        self._handlers: list[tuple[logging.StreamHandler[Any], Any]] = []

    def __enter__(self) -> RichProgress:
        before = sys.stderr
        self._live.start()
        # The CLI's log handler holds the stderr it saw at start; while the line is live (on a
        # terminal rich redirects stderr above it), its lines take the same way round.
        if sys.stderr is not before:
            for handler in logging.getLogger("openrouter_probe").handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream is before:
                    self._handlers.append((handler, handler.setStream(sys.stderr)))
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._live.refresh()
        self._live.stop()
        for handler, stream in self._handlers:
            handler.setStream(stream)
        self._handlers = []

    def row_done(self, record: dict[str, Any], run: Run) -> None:
        self._done += 1

    def line(self, run: Run) -> str:
        return progress_line(run, self._done, self._total, self._console.width)

    def tick(self, run: Run) -> None:
        self._text.plain = self.line(run)
        self._live.refresh()


class LastLine:
    """The run's last progress line, written to ``file`` (stderr) once as the run ends, in the
    console's width (``COLUMNS``, else a terminal's among the standard streams, else 80)."""

    def __init__(self, total: int, *, file: Any = None) -> None:
        self._file = file
        self._total = total
        self._done = 0
        self._width = _columns()
        self._line = ""

    def __enter__(self) -> LastLine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._line:
            file = self._file or sys.stderr
            file.write(self._line[: self._width] + "\n")
            file.flush()

    def row_done(self, record: dict[str, Any], run: Run) -> None:
        self._done += 1

    def line(self, run: Run) -> str:
        return progress_line(run, self._done, self._total, self._width)

    def tick(self, run: Run) -> None:
        self._line = self.line(run)


def _columns() -> int:
    """The width rich gives a console that is not a terminal."""
    width = 0
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
            break
        except (AttributeError, ValueError, OSError):  # not a terminal
            continue
    return env_columns() or width or 80


def env_columns() -> int | None:
    """``$COLUMNS`` when it is set to a positive number (the width tables and notes fit too)."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.strip().isdigit() and int(columns) > 0 else None


def _redrawn(stream: Any) -> bool:
    """Whether a live line on ``stream`` is redrawn: a terminal, Jupyter, or an environment that
    says so (rich's ``Console.is_terminal``, read without importing rich)."""
    if hasattr(builtins, "get_ipython") or os.environ.get("TTY_COMPATIBLE") == "1":
        return True
    if os.environ.get("TTY_COMPATIBLE") == "0":
        return False
    if os.environ.get("FORCE_COLOR") is not None:
        return os.environ["FORCE_COLOR"] != ""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_for(total: int) -> RichProgress | LastLine:
    """The progress of a run of ``total`` rows on stderr: rich's live line where it is redrawn,
    else the last line."""
    return RichProgress(total) if _redrawn(sys.stderr) else LastLine(total)
