"""What a simulation reads: workloads (traces, tables, generators, the papers' workloads),
cluster profiles, scaling and throughput tables, SLOs and co-location slowdowns, and the
bounded file readers they share."""
