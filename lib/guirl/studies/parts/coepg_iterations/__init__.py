"""Notebook 03's stage-level parts (:mod:`guirl.studies.coepg_iterations` imports them)."""
