"""The sender: what takes one attempt whose money the books reserved and journaled, and brings back
its answer. The scheduler talks to it through one small interface, as httpx's ``Client`` talks to a
``BaseTransport`` (``handle_request``): tests and other backends swap the sender, never the run.

Today's sender is ``HttpTransport.send`` (aiohttp, one chat completion per call); tests pass a
double (``tests/_generate.py``'s ``LedgerSender``). The contract, for every implementation:

- **Called after the books.** When ``send`` is called, the attempt's worst case is reserved under
  the cap and its ``sent`` line is in the journal, flushed: the sender never reserves or journals.
- **The generation id as soon as it is known.** ``on_id(id)`` the moment the sender learns it
  (the response headers; a batch's per-request id), so the journal has it before the answer.
- **One outcome per call.** An ``Answer`` (``usage.cost`` is what the books settle), or a
  ``Failure`` (``run.send.failure``: its kind decides what follows, in ``run.schedule.attempts``). A sender
  that cannot tell whether the request was billed says so (``Failure.cost_unknown``): the books
  count it at its worst case until ``/generation`` settles it. It raises nothing but
  ``CancelledError``; a cancellation is recorded by the run as a cancelled attempt.
- **``ceiling_s`` bounds the attempt**, from the call to the last byte (``RunPlan.ceiling_s``).
- **``key`` names the attempt** (``SendKey``: the row id, the attempt's number in the journal, its
  reservation and dataset). A sender that sends one request per call may ignore it; the batch
  sender needs it to write a batch's plan (custom ids and the attempts they carry) before the POST.

The **Batch API sender** (``run.send.batch_sender``, ``generate --batch``) is one more
implementation, with no change to the scheduler, the books or the journal beyond passing ``key``
(how it queues, submits and settles: docs/generate.md, "The run's parts, and the sender interface").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from openrouter_probe.run.send.failure import Failure
from openrouter_probe.run.send.transport import Answer

__all__ = ["SendKey", "Sender"]


@dataclass(slots=True)
class SendKey:
    """Which attempt a ``send`` carries: its row, its number in the journal (``sent``), its
    reserved worst case and its dataset. Never changed (not frozen: one is made per attempt, and
    a frozen dataclass pays an ``object.__setattr__`` per field)."""

    row_id: str
    number: int
    worst_usd: Decimal
    dataset: str


class Sender(Protocol):
    """Sends one request body (reserved and journaled) and returns its outcome (see the module)."""

    def __call__(
        self,
        body: bytes,
        *,
        stream: bool,
        on_id: Callable[[str], None] | None = None,
        ceiling_s: float | None = None,
        key: SendKey | None = None,
    ) -> Awaitable[Answer | Failure]: ...
