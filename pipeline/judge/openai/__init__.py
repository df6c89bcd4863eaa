"""The ``api`` backend: a judge behind an OpenAI-compatible endpoint (a ``vllm serve`` of your team's, or a hosted
model): request bodies in OpenAI's wire format (``bodies``), the engine that sends them (``engine``) and the check of
the label words against what the endpoint answers (``words``), on the shared endpoint toolkit
(:mod:`pipeline.judge.endpoint`)."""
