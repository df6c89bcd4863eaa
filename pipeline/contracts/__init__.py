"""Shared contracts: the Arrow schemas, the prompt key, what an engine is asked and answers, the prompt frame, errors.

Every other layer speaks these: :mod:`.schemas` (the tables at every stage boundary), :mod:`.keys` (the identity of
a judged prompt), :mod:`.engine` (``Request``, ``Result`` and the ``Engine`` protocol every engine implements),
:mod:`.frame` (the text around a message), :mod:`.errors` (what a user can fix), :mod:`.stats` (the judge's
numbers).
"""
