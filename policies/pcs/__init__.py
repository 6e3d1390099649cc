"""PCS (Ning et al.): weighted fair queueing by size class (:mod:`.wfq`) and the baselines PCS
compares against (:mod:`.baselines`: FIFO, SRSF, SRTF, LAS, max-min, Themis, AFS)."""
