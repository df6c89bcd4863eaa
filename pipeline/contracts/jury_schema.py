"""The tables of a jury (``scoring.jury``): each juror's line, and how far every two jurors agree
(:mod:`pipeline.scoring.jury_table`)."""

from __future__ import annotations

import pyarrow as pa

from pipeline.contracts.schemas import optional, required

JURORS = pa.schema(
    [
        *required(pa.string(), "attribute", "judge", "template_id"),
        # logit P(A wins) = scale (s_A - s_B) + bias + N(0, sigma2), scores of standard deviation 1
        *required(pa.float64(), "scale", "bias", "sigma2"),
        # scale^2 / sigma2, and this juror's share of the jury's information
        *required(pa.float64(), "weight", "share"),
        pa.field("answers", pa.int64(), nullable=False),
        # mean raw p(A wins): the juror's position bias
        pa.field("p_a_raw", pa.float64(), nullable=False),
    ]
)


JUROR_AGREEMENT = pa.schema(
    [
        *required(pa.string(), "attribute", "juror_a", "juror_b"),
        pa.field("pairs", pa.int64(), nullable=False),
        # verdicts per pair (orderings averaged): i / tie / j
        *optional(pa.float64(), "raw_agreement", "kappa"),
        # per-context Spearman of the two jurors' PoE-Gaussian scores, averaged
        pa.field("spearman", pa.float64()),
    ]
)
