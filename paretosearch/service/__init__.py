"""The service operators call: the preference API (:mod:`.api`) and the nightly retune
(:mod:`.retune`, its spec and window in :mod:`.retune_spec`)."""
