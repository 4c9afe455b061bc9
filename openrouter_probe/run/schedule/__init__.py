"""What goes when: the worker pool (``runner``), the rows' queues and fair shares (``queues``),
the row source (``source``), the retry policy (``attempts``), the failure streak
(``streak``), the waits (``waits``) and the garbage collector's pace while a job runs
(``garbage``).

The top room of ``run``: may import ``run.books``, ``run.send`` and ``run.money``, the run's
values and its options (``run.config``); ``rules`` and ``api`` (and ``errors``, ``files``).
"""
