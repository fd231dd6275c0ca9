"""Smoke chain "b" of the notebooks: the notebooks that do not read 02 (03, 04, 07, 08), after 00 and 01.

Its own module, so that ``make test``'s pytest-xdist (``--dist loadscope``: a module runs in order on
one process) runs it beside the other chain. The test, the chains and the output checks are in
tests/test_notebooks.py (``smoke_chain_test``, ``smoke_chains``, ``CHECKS``).
"""

from test_notebooks import smoke_chain_test

test_notebook_smoke = smoke_chain_test("b")
