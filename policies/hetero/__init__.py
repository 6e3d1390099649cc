"""Heterogeneity-aware allocation: Hadar (:mod:`.hadar`, its dynamic programme in
:mod:`.hadar_dp`), Gavel as its simulator runs (:mod:`.gavel`, its rounds compiled in
:mod:`.gavel_rounds`, its LP, cone program and FIFO in :mod:`.gavel_lp`), YARN-CS
(:mod:`.yarn`), Tiresias's two-queue LAS (:mod:`.tiresias`) and WFQ with per-GPU-type
weights (:mod:`.wfq_hetero`)."""
