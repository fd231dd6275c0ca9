"""The top layer: one module per notebook, same name (``notebooks/NN_name.ipynb`` <->
``guirl/studies/name.py``), holding what that notebook orchestrates (stage lists, tables,
figures), so each notebook cell is a few calls. What several notebooks share (inputs and
upstream results, evaluation bound to a run config, paired tables, 01's agents, RL runs) is in
:mod:`guirl.studies.shared`.

Import rules (``tests/test_layout.py``): a notebook's study module imports kernels, methods,
the config, the report helper and :mod:`guirl.studies.shared`, never another notebook's study
module; :mod:`guirl.studies.shared` imports no notebook's study module; nothing else in
``lib/guirl`` imports a study (only the notebooks and the tests do).
"""
