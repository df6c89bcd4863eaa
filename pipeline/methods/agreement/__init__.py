"""Agreement: with people's scores (:mod:`.metrics`: correlations per context, pooled and by system, pairwise
accuracy), between raters (:mod:`.raters`: kappas, Krippendorff's alpha) and model leaderboards with bootstrap
intervals (:mod:`.bootstrap`)."""
