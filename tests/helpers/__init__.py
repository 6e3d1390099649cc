"""What several test modules share, one module per concern: ``data`` (the real data in
../shared), ``exports`` (config documents and CRD checks), ``runs`` (run directories, journals,
retune specs, a worker killer), ``sharing`` (workloads that share GPUs and a harness that
checks every plan)."""
