"""The empirical precision check: the same pinned prompts on every endpoint, judged with statistics.

- ``stats``: Clopper-Pearson intervals, the exact paired (McNemar) test, Holm's correction, exact
  power and the verdicts ``consistent`` / ``differs`` / ``inconclusive``;
- ``suites``: the prompts (``arith`` from a seed, the built-in ``tools`` set, user JSONL);
- ``measures``: what each endpoint did, from responses already collected;
- ``plan``: pins through the routing model, request bodies, cost and power before sending;
- ``report``: ``build_report(plan, observations)`` (the seam a sending loop calls) and
  ``VerifyReport`` (DataFrame view, HTML repr, dated evidence YAML);
- ``run``: ``plan_precision_check`` (the plan, nothing sent) and ``verify_precision`` (the pinned
  requests through the generator's run under one spend cap, then the report).

The public names are re-exported by ``openrouter_probe``; ``openrouter-probe verify`` is the command.
"""
