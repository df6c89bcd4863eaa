"""The judge's engines behind one protocol: vLLM in-process, Hugging Face, an OpenAI-compatible API, the store.

:mod:`.models` resolves the judge (:mod:`.spec`), :mod:`.engines` opens its engine (:mod:`.vllm_engine`,
:mod:`.hf_engine`, :mod:`.openai`, :mod:`.anthropic`, :mod:`.recorded`), :mod:`.stored` puts the judgement store in front, :mod:`.worker` is what a judge
actor runs, :mod:`.watchdog` watches its engine, :mod:`.cores` and :mod:`.hardware` place it on the CPU.
"""
