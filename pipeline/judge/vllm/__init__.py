"""The product's engine, vLLM in this process or in processes of its own: the engine (:mod:`.engine`), its mode
(:mod:`.mode`), the cores and environment it computes with (:mod:`.cores`), its compiled model's cache
(:mod:`.compile_cache`)."""
