"""Workflows composed of named segments (input, prompts, judge, score, report), and the runner that executes them.

:mod:`.core` (``Segment``, ``Workflow``, the runner), :mod:`.segments` (the segments built from the config),
:mod:`.catalog` (the workflows a run can execute), :mod:`.describe` (``make stages``).
"""
