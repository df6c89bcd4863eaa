"""Scorers: scores from comparisons, one module per method (win-ratio, average probability, Bradley-Terry,
PoE-Gaussian, PoE-BT, PoE-Laplace, the capped log-odds, maximum-likelihood ranking, Davidson's ties, the jury's
product of experts, absolute scores as priors), their registry with what each can do (:mod:`.registry`), their
batched forms for the efficiency curves (:mod:`.batched`), the checks of their inputs (:mod:`.comparison_checks`) and the
PoE-Gaussian posterior and model fit every adaptive round reads (:mod:`.posterior`, :mod:`.model_fit`)."""
