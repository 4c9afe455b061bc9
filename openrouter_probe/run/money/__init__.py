"""Money and its record: prices and worst cases (``spend``: ``Prices``, ``SpendCap``), the dollar
window of the in-flight budget (``limit``), the client's journal of every reservation and answer
(``journal``: one line before a request leaves, one when it settles), its replay on resume
(``replay``).

The bottom room of ``run``: imports nothing else of ``run``; may import ``rules`` and ``api``
(and ``errors``, ``files``).
"""
