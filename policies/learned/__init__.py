"""Learned parts: Horus's utilization and interference predictors (:mod:`.predictors`) and the
profiling data they are fitted on (:mod:`.profiling_data`)."""
