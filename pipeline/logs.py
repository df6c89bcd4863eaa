"""One logging setup for the driver: a terse console format, optionally a copy in the run folder."""

from __future__ import annotations

import logging
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
QUIET = ("urllib3", "filelock", "matplotlib", "alembic", "httpx", "transformers", "huggingface_hub")


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=level.upper(), format=FORMAT, datefmt="%H:%M:%S", force=True)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)


def add_file_log(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    logging.getLogger("pipeline").addHandler(handler)
    return handler
