"""Simulation with a known truth (:mod:`.simulate`) and the efficiency curves: agreement with people as a function of
the comparisons judged (:mod:`.efficiency`)."""
