"""One request to the wire and back: the request body (``request``), one row's attempts
(``attempt``), the HTTP transport and its answers (``transport``), OpenRouter's errors
classified (``failure``), the sender seam (``sender``) and the Batch API sender (``batch_*``:
plan, calls, watch, sender), which returns outcomes and events and holds no books.

May import ``run.money`` and the run's values (``run.rows``, ``run.stop``, ``run.tallies``,
``run.start``, ``run.result``, ``run.counts``); ``rules`` and ``api`` (and ``errors``, ``files``).
"""
