"""Blind human review of a finished run's comparisons in the browser, and how far reviewers and the judge agree.

- :mod:`pipeline.review.sample`: the review items (one per judged pair) and the seeded sample drawn from them;
- :mod:`pipeline.review.answers`: the append-only answer log (one JSON line per answer, written before the page
  moves on);
- :mod:`pipeline.review.agreement`: answers mapped back to candidates, agreement with the judge and between
  reviewers (:mod:`pipeline.methods.agreement.raters`), written to the run folder and logged to MLflow;
- :mod:`pipeline.review.app`: the page (Flask, server-rendered, escaped by Jinja; no JavaScript build);
- ``python -m pipeline.review serve|report``: the commands (``make review``, ``make review-report``).
"""
