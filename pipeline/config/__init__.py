"""The typed config: its schema (one dataclass per concern), its enums, its validation and Hydra's side.

:mod:`.enums` and the schema modules (:mod:`.assessment`, :mod:`.judging`, :mod:`.adaptive_rounds`, :mod:`.run`) declare what
a user can set; :mod:`.validate` and :mod:`.checks` refuse what could not be applied as written; :mod:`.hydra`
composes ``conf/`` and converts it once; :mod:`.derived` gives what follows from the config (paths, identities).
"""
