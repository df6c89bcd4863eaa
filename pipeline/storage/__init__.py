"""What a run keeps on disk: the run folder's Parquet parts and the SQLite judgement store and reply cache.

:mod:`.parts` (judgments, ratings and generations as parts carrying their judging identity), :mod:`.judgements`
(answers by judge, request and prompt across runs), :mod:`.sqlite` (values by key in one file).
"""
