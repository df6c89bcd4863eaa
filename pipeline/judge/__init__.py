"""The LLM judge: label words and p(A wins) (labels), the resolved judge (spec), engines that read first-token
label log-probabilities (engines), and the worker a judge actor runs (worker)."""
