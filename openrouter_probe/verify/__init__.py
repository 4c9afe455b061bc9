"""The empirical precision check: the same pinned prompts on every endpoint, judged with statistics.

- ``stats``: Clopper-Pearson intervals, the mid-p paired (McNemar) test, the floor test, Tango's
  interval for equivalence, Holm's correction, power;
- ``verdict``: the deciding measures as paired counts, judged: ``consistent`` / ``differs`` /
  ``inconclusive``;
- ``suites``: the prompts (``arith`` and ``tools`` generated from a seed, user JSONL);
- ``observation``: one response as the check reads it (a completion body or an output line);
- ``measures``: what each endpoint did, and its deciding measures, from responses already collected;
- ``pins``: the pin of each endpoint through the routing model, and the request body sent;
- ``plan``: what the check sends where, its cost and power, before sending;
- ``prompt_tokens``: prompt-token agreement with the reference (another chat template);
- ``toolcalls``: tool calls as K2-Vendor-Verifier scores them (schema accuracy, F1, threshold);
- ``logprobs``: the token-level top-k logprob comparison on the reference's own completions;
- ``binomial``: the binomial probabilities the exact tests and power sums add up (the log
  factorials from a table kept across calls);
- ``results``: ``TestResult``, the one shape every test is reported in, and ``decided_by``;
- ``endpoint_tests``: every test of one endpoint, deciding and beside the verdict, and its row of
  the report (``EndpointResult``);
- ``kept``: which responses are judged (leaked pins, repeats and outsiders set aside);
- ``report``: ``build_report(plan, observations)`` (the seam a sending loop calls) and
  ``VerifyReport`` (DataFrame view, HTML repr, dated evidence YAML);
- ``run``: ``plan_precision_check`` (the plan, nothing sent) and ``verify_precision`` (the pinned
  requests through the generator's run under one spend cap, then the report).

The public names are re-exported by ``openrouter_probe``; ``openrouter-probe verify`` is the command.
May import ``run``, ``policy``, ``rules`` and ``api``; never ``generate`` or ``cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import exports_of, lazy_exports

# The public names, written once as the imports a type checker reads (``exports_of``).
if TYPE_CHECKING:
    from openrouter_probe.verify.plan import VerifyPlan as VerifyPlan
    from openrouter_probe.verify.plan import plan_verify as plan_verify
    from openrouter_probe.verify.report import VerifyReport as VerifyReport
    from openrouter_probe.verify.report import build_report as build_report
    from openrouter_probe.verify.run import plan_precision_check as plan_precision_check
    from openrouter_probe.verify.run import verify_precision as verify_precision

_EXPORTS: dict[str, str] = exports_of(__file__)
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
