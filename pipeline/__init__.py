"""LLM comparative assessment at scale.

`import pipeline` is light: it imports no torch, vLLM or Ray. Heavy parts load where they run.
"""

from pathlib import Path

__version__ = "0.1.0"

# The project folder (conf/, the default outputs and cache); relative paths in the config are resolved against it.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
