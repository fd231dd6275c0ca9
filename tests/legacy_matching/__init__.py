"""Frozen copies of the step-matching code as it was before ``guirl.matching`` (commit c7e8c23).

``tests/test_matching_equivalence.py`` compares the engine with them on randomised steps: every
evaluator protocol must score exactly as before, and every reward must return the same totals
and components. These copies are test fixtures, not library code. When a later change alters a
protocol or a reward on purpose (golden files of the original evaluators, paper-default
rewards), remove that protocol or reward from the equivalence test and say why there.
"""
