"""The run's books and files: reserve and settle against the cap (``books``), output billed past
``max_tokens`` (``overshoot``), costs read back later (``reconcile``), the batch events journaled
(``batch_books``), the output rows and resume state (``output``) and the turn-by-turn record
(``turns``).

May import ``run.send`` and ``run.money`` and the run's values (``run.rows``, ``run.stop``,
``run.tallies``, ``run.start``, ``run.result``, ``run.counts``); ``rules`` and ``api`` (and
``errors``, ``files``).
"""
