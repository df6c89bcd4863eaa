"""The tables of a jury (``scoring.jury``): each juror's line, and how far every two jurors agree
(:mod:`pipeline.scoring.jury_table`)."""

from __future__ import annotations

import pyarrow as pa

JURORS = pa.schema(
    [
        pa.field("attribute", pa.string(), nullable=False),
        pa.field("judge", pa.string(), nullable=False),
        pa.field("template_id", pa.string(), nullable=False),
        # logit P(A wins) = scale (s_A - s_B) + bias + N(0, sigma2), scores of standard deviation 1
        pa.field("scale", pa.float64(), nullable=False),
        pa.field("bias", pa.float64(), nullable=False),
        pa.field("sigma2", pa.float64(), nullable=False),
        # scale^2 / sigma2, and this juror's share of the jury's information
        pa.field("weight", pa.float64(), nullable=False),
        pa.field("share", pa.float64(), nullable=False),
        pa.field("answers", pa.int64(), nullable=False),
        # mean raw p(A wins): the juror's position bias
        pa.field("p_a_raw", pa.float64(), nullable=False),
    ]
)


JUROR_AGREEMENT = pa.schema(
    [
        pa.field("attribute", pa.string(), nullable=False),
        pa.field("juror_a", pa.string(), nullable=False),
        pa.field("juror_b", pa.string(), nullable=False),
        pa.field("pairs", pa.int64(), nullable=False),
        # verdicts per pair (orderings averaged): i / tie / j
        pa.field("raw_agreement", pa.float64()),
        pa.field("kappa", pa.float64()),
        # per-context Spearman of the two jurors' PoE-Gaussian scores, averaged
        pa.field("spearman", pa.float64()),
    ]
)
