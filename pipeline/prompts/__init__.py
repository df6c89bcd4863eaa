"""The prompts, settled once with the judge's tokenizer: chat frame, label tokens, templates, pairs, lengths.

:mod:`.plan` (the :class:`.plan.PromptPlan`), :mod:`.chat` (the chat template's frame), :mod:`.labels` and
:mod:`.absolute` (the words read and their token ids), :mod:`.render` (template fields), :mod:`.pairs` (which pairs
and the prompt stream), :mod:`.preflight` (every prompt fits), :mod:`.generation` and :mod:`.reasons`.
"""
