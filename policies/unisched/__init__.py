"""UniSched: leases and rewards for SLO and best-effort jobs (:mod:`.policy`), its JCT estimates
(:mod:`.estimate`) and selector MILP (:mod:`.milp`), and the SLO baselines (:mod:`.baselines`:
LLF, Hydra)."""
