"""Judgments into tables: the reduce, comparative and absolute scores, combination, leaderboard, correlations, cost.

Each module is the tables of one step (pure functions on Polars frames), the maths being :mod:`pipeline.methods`.
"""
