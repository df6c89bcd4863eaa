"""Adaptive design: which pairs to judge (:mod:`.selection`), the round strategies (:mod:`.reorder`, :mod:`.locate`,
:mod:`.windowed`), when to stop (:mod:`.stopping`), the sorting baselines (:mod:`.sorting`) and the one round loop
(:mod:`.loop`)."""
