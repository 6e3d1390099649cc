"""Horus: interference-aware co-location on shared GPUs (:mod:`.policy`), its utilization-based
queues (:mod:`.queues`) and baselines (:mod:`.baselines`: FIFO-exclusive, OBP, PAB)."""
