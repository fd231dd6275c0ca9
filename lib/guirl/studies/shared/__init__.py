"""What several notebooks' studies share: the run's inputs and upstream results (:mod:`.inputs`),
evaluation bound to a run config (:mod:`.evaluation`), paired tables (:mod:`.paired`), notebook
01's SFT agents as stages (:mod:`.agents`) and RL runs as stages (:mod:`.rl_runs`)."""
