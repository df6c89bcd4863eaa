"""Logging: a console that shows the pipeline's own lines, and everything else in the run folder.

- The console shows the ``pipeline.*`` loggers (input, judge, progress with rate and ETA, outputs, the summary)
  and errors from anywhere. Library warnings, Python warnings and everything else go to ``run.log``.
- The command line (:mod:`pipeline.cli`) also captures the process's own output (file descriptors 1 and 2:
  Ray's and vLLM's prints, C++ log lines, progress bars) into the run folder's ``run.log``; the console keeps
  a duplicate of the original stream for the pipeline's lines. Judge actors send their output to
  ``logs/<step>-<host>-<pid>.log`` in the run folder (:mod:`pipeline.runtime.ray_data`).
- ``verbose=true`` turns all of that off: every line reaches the console, as the libraries print them.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import TextIO

FILE_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
# Libraries too chatty for run.log at INFO.
QUIET = ("urllib3", "filelock", "matplotlib", "alembic", "httpx", "huggingface_hub", "asyncio")


class ConsoleFormatter(logging.Formatter):
    """``HH:MM:SS message``, with the level named only for warnings and errors."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(message)s", datefmt="%H:%M:%S")
        self.alarm = logging.Formatter("%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record) if record.levelno < logging.WARNING else self.alarm.format(record)


# ``log.info(..., extra=FILE_ONLY)``: a record for run.log, not the console (stage boundaries, settings).
FILE_ONLY = {"console": False}


class ConsoleFilter(logging.Filter):
    """The pipeline's own records, and errors from anywhere (everything when verbose)."""

    def __init__(self, verbose: bool):
        super().__init__()
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "console", True):
            return False
        if self.verbose or record.levelno >= logging.ERROR:
            return True
        return record.name.startswith("pipeline")


class _Capture:
    """The process's stdout/stderr file descriptors pointed at a log file; the console kept as a duplicate."""

    def __init__(self, path: Path):
        self.console = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
        self.stdout = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8", errors="replace")
        redirect_output(path)
        self.path = path

    def move_to(self, path: Path) -> None:
        """Continue in ``path`` (the run folder's run.log), keeping what was written so far."""
        old = self.path
        if old == path:
            return
        redirect_output(path)  # from here on the process writes to the new file ...
        with open(path, "ab") as out, open(old, "rb") as before:  # ... after what it wrote so far
            out.write(before.read())
        self.path = path
        old.unlink(missing_ok=True)
        try:
            old.parent.rmdir()  # the pending folder, if nothing else is in it
        except OSError:
            pass


_capture: _Capture | None = None


def console() -> TextIO:
    """Where the pipeline's console lines go: the original stderr, also while the process output is captured."""
    return _capture.console if _capture is not None else sys.stderr


def results() -> TextIO:
    """Where results go (the summary table): the original stdout, also while the process output is captured."""
    return _capture.stdout if _capture is not None else sys.stdout


def capture_process_output(path: Path) -> None:
    """Send this process's stdout/stderr (fds 1 and 2) to ``path`` until the run folder exists (then run.log)."""
    global _capture
    if _capture is None:
        _capture = _Capture(path)


def captured_output_path() -> Path | None:
    return _capture.path if _capture is not None else None


def move_captured_output(path: Path) -> None:
    if _capture is not None:
        _capture.move_to(path)


def setup_logging(level: str = "INFO", verbose: bool = False) -> None:
    """The console handler (the pipeline's lines; everything when ``verbose``) and Python warnings as log records."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_pipeline_console", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(console())
    handler._pipeline_console = True  # type: ignore[attr-defined]
    handler.setLevel(level.upper())
    handler.setFormatter(ConsoleFormatter())
    handler.addFilter(ConsoleFilter(verbose))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.getLogger("pipeline").setLevel(level.upper())
    logging.captureWarnings(True)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)


def workspace(name: str, verbose: bool = False) -> Path:
    """A fresh folder for a measurement's run (``/tmp/<name>-*``) whose ``output.log`` takes the engines' and Ray's
    output (on the console with ``verbose``), and the pipeline's log lines on the console."""
    work = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    if not verbose:
        capture_process_output(work / "output.log")
    setup_logging("INFO", verbose)
    return work


class RunLog:
    """The run folder's ``run.log``: every log record of the run. Records from before the folder exists (input
    checks, model resolution) are held in memory and written first when it is opened."""

    def __init__(self, level: str = "INFO"):
        self.level = logging.DEBUG if level.upper() == "DEBUG" else logging.INFO
        self.buffer = logging.handlers.MemoryHandler(capacity=100_000, flushLevel=logging.CRITICAL + 1)
        self.buffer.setLevel(self.level)
        self.file: logging.FileHandler | None = None
        logging.getLogger().addHandler(self.buffer)
        # the pipeline's INFO records reach run.log also when no one configured logging (a notebook, a test)
        self._pipeline = logging.getLogger("pipeline")
        self._old_level = self._pipeline.level
        if self._pipeline.getEffectiveLevel() > self.level:
            self._pipeline.setLevel(self.level)

    def open(self, path: Path) -> None:
        move_captured_output(path)
        self.file = logging.FileHandler(path, encoding="utf-8")
        self.file.setLevel(self.level)
        self.file.setFormatter(logging.Formatter(FILE_FORMAT))
        self.buffer.setTarget(self.file)
        self.buffer.flush()
        root = logging.getLogger()
        root.removeHandler(self.buffer)
        root.addHandler(self.file)

    def close(self) -> None:
        root = logging.getLogger()
        for handler in (self.buffer, self.file):
            if handler is not None:
                root.removeHandler(handler)
                handler.close()
        self._pipeline.setLevel(self._old_level)


def redirect_output(path: Path) -> None:
    """Point this process's stdout and stderr (fds 1 and 2, inherited by processes it starts) at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def with_output_to(cls: type, log_dir: Path, step: str) -> type:
    """``cls`` whose instances first send their process's output to a file in ``log_dir`` (an actor's own
    output: the engine's log lines, warnings and progress bars)."""

    def __init__(self, *args, **kwargs):  # noqa: N807
        path = log_dir / f"{step}-{socket.gethostname()}-{os.getpid()}.log"
        try:
            redirect_output(path)
        except OSError as exc:  # e.g. a cluster node without the run folder's file system
            logging.getLogger(__name__).warning(
                "output stays in Ray's worker logs: cannot write %s (%s)", path, exc
            )
        cls.__init__(self, *args, **kwargs)

    return type(cls.__name__, (cls,), {"__init__": __init__})
