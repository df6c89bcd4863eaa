"""From the judge's outputs to verdicts: P(A wins) from the label words' log-probabilities (:mod:`.win_probability`),
position bias measured and removed (:mod:`.debias`), absolute scores from a rating prompt (:mod:`.absolute_scores`), a verdict's words counted
over samples (:mod:`.sampled`)."""
