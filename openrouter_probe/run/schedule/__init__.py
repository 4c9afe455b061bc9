"""What goes when: the worker pool (``runner``), the rows' queues and fair shares (``queues``),
the row source (``source``), the retry policy (``attempts``), the failure streak
(``streak``), the waits (``waits``) and the garbage collector's pace while a job runs
(``garbage``).
"""
