"""The judge's engines behind one protocol: vLLM in-process, Hugging Face, an OpenAI-compatible API, the store.

:mod:`.models` resolves the judge (:mod:`.spec`); :mod:`.vllm` is the product's engine, :mod:`.hf_engine`,
:mod:`.openai`, :mod:`.anthropic` and :mod:`.recorded` the others; :mod:`.hosting` is what a judge worker runs (the
engine it opens, the watch on its processes); :mod:`.stored` puts the judgement store in front; :mod:`.hardware`
reads the CPU.
"""
