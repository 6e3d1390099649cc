"""The search: SPEA2 over a policy's declared space (:mod:`.spea2`), the objectives operators
name (:mod:`.objectives`), one evaluation (:mod:`.evaluation`), where evaluations run
(:mod:`.runners`, :mod:`.cluster`) and the evaluation cache shared across runs (:mod:`.cache`).
"""
