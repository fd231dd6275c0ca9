"""Command-line entries of training stages (``main(argv)``).

Each entry loads the resolved run config (top layer) and calls a kernel in :mod:`guirl.train`;
:func:`guirl.train.launch.run_stage` runs one, as ``accelerate launch -m <entry>``, as the process
that launcher would start, or (a single-process CPU stage alone) by calling ``main`` in its own
process (:func:`guirl.train.launch.launch_mode`).
"""
