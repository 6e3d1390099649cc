"""OJPP: opportunistic placement of jobs on shared GPUs within bounds (:mod:`.policy`), its
placement rules (:mod:`.placement`) and packing (:mod:`.pack`)."""
