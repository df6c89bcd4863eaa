"""The tables of trust with a guarantee (``trust``; :mod:`pipeline.scoring.trust_table`, :mod:`pipeline.scoring.ppi_board`):
people's labels with their inclusion probabilities, each judge's certified threshold in the cascade, the comparisons
kept and escalated, the risk-coverage curve, and the prediction-powered leaderboard."""

from __future__ import annotations

import pyarrow as pa

from pipeline.contracts.schemas import GROUP_FIELDS, optional, required

# One row per pair of candidates of the population people's labels were drawn from (the same for every judge and
# template): its probability of being drawn, people's preference for i where it was labelled (1, a tie 1/2, 0; null:
# not drawn), where its label came from and how many answers made it. A certificate or a PPI estimate covers these
# pairs only: the run's pairs with no row here are outside what the labels say anything of.
LABELS = pa.schema(
    [
        *required(pa.string(), "attribute", "context_id", "cand_i", "cand_j"),
        pa.field("preference", pa.float64()),
        pa.field("inclusion", pa.float64(), nullable=False),
        # data (human scores) | review (the blind review's answers)
        pa.field("source", pa.string(), nullable=False),
        pa.field("answers", pa.int64(), nullable=False),
    ]
)

# One row per judge (and template) of the cascade, per attribute: its place, the threshold certified on the labels of
# the comparisons the judges before it left open (null: none), what it keeps and how far it agrees with people.
TRUST = pa.schema(
    [
        *GROUP_FIELDS,
        pa.field("step", pa.int32(), nullable=False),
        pa.field("alpha", pa.float64(), nullable=False),
        # the judge's share of delta (delta / the judges of the cascade)
        pa.field("delta", pa.float64(), nullable=False),
        pa.field("certified", pa.bool_(), nullable=False),
        pa.field("threshold", pa.float64()),
        # the labels it was calibrated on, those at or above its threshold and their disagreements with people, and
        # the exact upper bound on its disagreement there (1 where nothing is certified)
        *required(pa.int64(), "n_labels", "labels_kept", "disagreements"),
        pa.field("bound", pa.float64(), nullable=False),
        pa.field("agreement", pa.float64()),
        # the share of the attribute's comparisons it keeps, and of those the judges before it left open
        pa.field("coverage", pa.float64(), nullable=False),
        pa.field("coverage_open", pa.float64()),
        # where nothing is certified: the labels that would certify it at the disagreement observed (null: no number
        # would, or it is certified), and that disagreement
        pa.field("labels_needed", pa.int64()),
        pa.field("observed_disagreement", pa.float64()),
        # the population the labels were drawn from (and the certificate covers), of the attribute's comparisons
        *required(pa.int64(), "population", "comparisons"),
    ]
)

# One row per pair of candidates and attribute: which judge (judge/template) keeps its verdict, or "escalated" (to
# people: the review's queue); the verdict kept (its debiased P(i beats j) and tie probability) and its confidence;
# whether people labelled it, and their preference.
ACCEPTED = pa.schema(
    [
        *required(pa.string(), "attribute", "context_id", "cand_i", "cand_j", "accepted_by"),
        *optional(pa.float64(), "p", "p_tie", "confidence"),
        pa.field("labelled", pa.bool_(), nullable=False),
        pa.field("preference", pa.float64()),
        # whether the pair is in the population the labels were drawn from (outside it nothing is certified: escalated)
        pa.field("population", pa.bool_(), nullable=False),
    ]
)

# Per judge of the cascade: its disagreement with people on the labels it was calibrated on, kept at or above each
# threshold of the fixed grid (where any are), with the bound there: the risk-coverage curve.
RISK_COVERAGE = pa.schema(
    [
        *GROUP_FIELDS,
        *required(pa.float64(), "threshold", "coverage", "risk", "bound"),
    ]
)

# Per judge, attribute, template, metric (win_rate, bradley_terry) and model: the estimate and its interval from
# people and the judge together (source "ppi": PPI++), from people alone ("people"), and the labels it rests on, the
# power-tuning lam, and the labels people alone would need for an interval as narrow.
PPI_LEADERBOARD = pa.schema(
    [
        *GROUP_FIELDS,
        *required(pa.string(), "metric", "model", "source"),
        *optional(pa.float64(), "estimate", "lower", "upper", "lam"),
        *required(pa.int64(), "n_labels", "n_games"),
        pa.field("effective_labels", pa.float64()),
        # which interval (PPI++'s, Clopper-Pearson's exact one for people's labels alone, the sandwich's), or none and why
        pa.field("interval", pa.string(), nullable=False),
    ]
)
