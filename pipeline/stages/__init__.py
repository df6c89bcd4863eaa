"""The stages, one module per family: each a small class with typed settings, declared ports and one ``run``.

:mod:`.base` (``Stage``, ``Port``), :mod:`.ports` (every value passed between stages), :mod:`.answers`,
:mod:`.generation`, :mod:`.judging`, :mod:`.rounds`, :mod:`.scoring`, :mod:`.reasons`, :mod:`.reporting`. No stage
imports Ray: streamed work goes through the run's executor (:mod:`pipeline.runtime`).
"""
