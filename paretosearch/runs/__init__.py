"""A search's run and what is read from it: the run directory (:mod:`.store`), choosing a
configuration (:mod:`.select`), its Optuna copy (:mod:`.optuna_copy`), tables and reports
(:mod:`.report`, :mod:`.report_html`) and plots (:mod:`.plots`)."""
