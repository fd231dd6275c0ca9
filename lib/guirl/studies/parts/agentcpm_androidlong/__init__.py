"""Notebook 07's stage-level parts (:mod:`guirl.studies.agentcpm_androidlong` imports them)."""
