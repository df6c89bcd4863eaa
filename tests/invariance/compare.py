"""Tables compared as the declared roles say (:mod:`pipeline.contracts.roles`): names mapped back, pairs read in one
orientation, name lists in one order, rows in one order, floats within a tolerance; and the checks every table
passes on its own (finite, probabilities in [0, 1], estimates inside their intervals, nulls only where "not
defined")."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import polars as pl

from pipeline.contracts.roles import COMPLEMENT, NEGATE, Roles

TOLERANCE = 1e-9
# What joins names into one string: <input>:<model>, judge/template, tied_with lists, assessment templates.
SEPARATORS = re.compile(r"(:|/|, |\+|\x1f)")


def map_names(value: str | None, inverse: Mapping[str, str]) -> str | None:
    if value is None or not inverse:
        return value
    return "".join(inverse.get(part, part) for part in SEPARATORS.split(value))


def as_set(value: str | None, separators: tuple[str, ...]) -> str | None:
    """A list of names joined by the first separator (each part by the next) in sorted order."""
    if not value or not separators:
        return value
    sep, inner = separators[0], separators[1:]
    return sep.join(sorted(as_set(part, inner) or "" for part in value.split(sep)))


def canonical(
    frame: pl.DataFrame, roles: Roles, inverse: Mapping[str, str], keep_input_order: bool = True
) -> pl.DataFrame:
    """The table with names mapped back (``inverse``), pairs oriented by name, name lists sorted, measured
    columns dropped, rows sorted."""
    drop = [c for c in roles.measured if c in frame.columns]
    if not keep_input_order:
        drop += [c for c in roles.input_order if c in frame.columns]
    out = frame.drop(drop)
    for name, dtype in out.schema.items():
        if dtype == pl.String:
            out = out.with_columns(
                pl.col(name).map_elements(lambda v: map_names(v, inverse), return_dtype=pl.String)
            )
        elif dtype == pl.List(pl.String):
            out = out.with_columns(
                pl.col(name).list.eval(
                    pl.element().map_elements(lambda v: map_names(v, inverse), return_dtype=pl.String)
                )
            )
    for name, seps in roles.sets.items():
        out = out.with_columns(
            pl.col(name).map_elements(lambda v, s=seps: as_set(v, s), return_dtype=pl.String)
        )
    if roles.pair is not None:
        out = oriented(out, roles)
    keys = [c for c, t in out.schema.items() if t in (pl.String, pl.Int32, pl.Int64, pl.Boolean, pl.UInt32)]
    floats = [c for c, t in out.schema.items() if t in (pl.Float64, pl.Float32)]
    order = keys + floats
    return out.sort(order, nulls_last=True) if order else out


def oriented(frame: pl.DataFrame, roles: Roles) -> pl.DataFrame:
    """Every pair with its first name the smaller: rows the other way round swap the pair and their flips."""
    i, j = roles.pair  # type: ignore[misc]
    turn = pl.col(i) > pl.col(j)
    swaps = {i: j, j: i}
    for column, how in roles.flips.items():
        if how not in (COMPLEMENT, NEGATE):
            swaps[column], swaps[how] = how, column
    exprs = []
    for column in frame.columns:
        if column in swaps:
            exprs.append(pl.when(turn).then(pl.col(swaps[column])).otherwise(pl.col(column)).alias(column))
        elif roles.flips.get(column) == COMPLEMENT:
            exprs.append(pl.when(turn).then(1.0 - pl.col(column)).otherwise(pl.col(column)).alias(column))
        elif roles.flips.get(column) == NEGATE:
            exprs.append(pl.when(turn).then(-pl.col(column)).otherwise(pl.col(column)).alias(column))
        else:
            exprs.append(pl.col(column))
    return frame.select(exprs)


def assert_same(name: str, got: pl.DataFrame, want: pl.DataFrame, tol: float = TOLERANCE) -> None:
    """The same rows: strings, integers and booleans equal, floats (and lists of floats) within ``tol``."""
    assert got.columns == want.columns, f"table {name}: columns {got.columns} != {want.columns}"
    assert got.height == want.height, f"table {name}: {got.height} rows, expected {want.height}"
    for column in want.columns:
        a, b = got[column], want[column]
        if a.dtype in (pl.Float64, pl.Float32) or a.dtype == pl.List(pl.Float64):
            x, y = _floats(a), _floats(b)
            assert x.shape == y.shape, f"table {name}, column {column}: shapes {x.shape} != {y.shape}"
            same_nan = np.isnan(x) == np.isnan(y)
            assert same_nan.all(), (
                f"table {name}, column {column}: nulls differ at rows {np.flatnonzero(~same_nan)[:5]}"
            )
            close = np.isnan(y) | (np.abs(x - y) <= tol * (1 + np.abs(y)))
            assert close.all(), (
                f"table {name}, column {column}: {int((~close).sum())} value(s) moved, by up to "
                f"{np.nanmax(np.abs(x - y)):.3g}: e.g. {x[~close][:3]} against {y[~close][:3]}"
            )
        else:
            differ = [k for k, (p, q) in enumerate(zip(a.to_list(), b.to_list(), strict=True)) if p != q]
            assert not differ, (
                f"table {name}, column {column}: {len(differ)} value(s) differ, e.g. row {differ[0]}: "
                f"{a[differ[0]]!r} against {b[differ[0]]!r}"
            )


def _floats(series: pl.Series) -> np.ndarray:
    if series.dtype == pl.List(pl.Float64):
        lengths = series.list.len().fill_null(0).to_numpy().astype(np.float64)
        flat = series.explode().cast(pl.Float64).fill_null(np.nan).to_numpy()
        return np.concatenate([lengths, flat])
    return series.cast(pl.Float64).fill_null(np.nan).to_numpy()


def assert_sound(name: str, frame: pl.DataFrame, roles: Roles) -> None:
    """A table on its own: no NaN or infinity anywhere, nulls only in "not defined" columns, probabilities in
    [0, 1], every estimate inside its interval."""
    for column, dtype in frame.schema.items():
        if column in roles.measured:
            continue
        series = frame[column]
        if column not in roles.undefined:
            assert series.null_count() == 0, f"table {name}, column {column}: {series.null_count()} null(s)"
        if dtype in (pl.Float64, pl.Float32):
            values = series.drop_nulls().to_numpy()
            assert np.isfinite(values).all(), (
                f"table {name}, column {column}: {int((~np.isfinite(values)).sum())} NaN or infinite value(s) "
                "(a value that is not defined is null, printed n/a)"
            )
        elif dtype == pl.List(pl.Float64):
            values = series.explode().drop_nulls().to_numpy()
            assert np.isfinite(values).all(), f"table {name}, column {column}: NaN or infinite value(s)"
    for column in roles.probabilities:
        values = frame[column].drop_nulls().to_numpy()
        assert ((values >= 0) & (values <= 1)).all(), (
            f"table {name}, column {column}: value(s) outside [0, 1]: {values[(values < 0) | (values > 1)][:3]}"
        )
    for est, low, high in roles.intervals:
        rows = frame.drop_nulls([est, low, high])
        bad = rows.filter((pl.col(low) > pl.col(est)) | (pl.col(est) > pl.col(high)))
        assert not bad.height, (
            f"table {name}: {bad.height} estimate(s) outside their interval, e.g. {bad.row(0, named=True)}"
        )
        # an interval needs its estimate; an estimate may stand without one (no interval narrower than its data:
        # too few units for a valid one), its two bounds together
        missing = frame.filter(
            (pl.col(est).is_null() & pl.col(low).is_not_null())
            | (pl.col(low).is_null() != pl.col(high).is_null())
        )
        assert not missing.height, (
            f"table {name}: an interval without its estimate, or a bound without the other: "
            f"{missing.head(2).to_dicts()}"
        )
