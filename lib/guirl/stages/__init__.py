"""Command-line entries of training stages, run by ``accelerate launch`` as subprocesses.

Each entry loads the resolved run config (top layer) and calls a kernel in :mod:`guirl.train`;
:func:`guirl.train.launch.run_stage` starts them. Never imported by a notebook kernel.
"""
