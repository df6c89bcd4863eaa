"""LLM comparative assessment at scale.

`import pipeline` is light: it imports no torch, vLLM or Ray. Heavy parts load where they run.
"""

__version__ = "0.1.0"
