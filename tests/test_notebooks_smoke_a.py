"""Smoke chain "a" of the notebooks: 02 and the notebooks that read it (05, 06), after 00 and 01.

Its own module, so that ``make test``'s pytest-xdist (``--dist loadscope``: a module runs in order on
one process) runs it beside the other chain. The test, the chains and the output checks are in
tests/test_notebooks.py (``smoke_chain_test``, ``smoke_chains``, ``CHECKS``).
"""

from test_notebooks import smoke_chain_test

test_notebook_smoke = smoke_chain_test("a")
