"""The fluid engine: jobs progress at constant rates between events, and a kernel policy
re-decides every allocation at each event (PCS's semantics; :mod:`simulator.fluid.engine`)."""
