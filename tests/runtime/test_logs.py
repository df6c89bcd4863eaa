"""The console shows the pipeline's lines and errors; everything else goes to the run's log file."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

from pipeline.runtime.logs import FILE_ONLY, ConsoleFilter, RunLog
from tests.conftest import ROOT


def record(name: str, level: int, **extra) -> logging.LogRecord:
    rec = logging.LogRecord(name, level, __file__, 1, "message", None, None)
    rec.__dict__.update(extra)
    return rec


def test_the_console_filter():
    quiet, verbose = ConsoleFilter(False), ConsoleFilter(True)
    assert quiet.filter(record("pipeline.judge", logging.INFO))
    assert not quiet.filter(record("pipeline.workflow", logging.INFO, **FILE_ONLY))
    assert not quiet.filter(record("ray.data", logging.WARNING))
    assert not quiet.filter(record("py.warnings", logging.WARNING))
    assert quiet.filter(record("ray.data", logging.ERROR))
    # a record meant for run.log only stays there, whatever its level (the CLI reports the error itself)
    assert not quiet.filter(record("pipeline.run", logging.ERROR, **FILE_ONLY))
    assert not verbose.filter(record("pipeline.run", logging.ERROR, **FILE_ONLY))
    assert all(verbose.filter(record(n, logging.INFO)) for n in ("ray.data", "vllm", "pipeline"))


def test_records_before_the_run_folder_exists_reach_run_log(tmp_path):
    run_log = RunLog("INFO")
    try:
        logging.getLogger("pipeline.test").info("before the folder")
        run_log.open(tmp_path / "run.log")
        logging.getLogger("pipeline.test").info("after it")
        logging.getLogger("somelib").warning("a library warning")
    finally:
        run_log.close()
    text = (tmp_path / "run.log").read_text()
    assert text.index("before the folder") < text.index("after it") and "a library warning" in text


def test_the_process_output_is_captured_and_moved_into_the_run_folder(tmp_path):
    # a real process: prints, C-level writes to fd 2, a child process, and the pipeline's console line
    script = textwrap.dedent(
        f"""
        import logging, os, subprocess, sys
        from pathlib import Path
        from pipeline.runtime.logs import capture_process_output, console, results, setup_logging, RunLog
        capture_process_output(Path({str(tmp_path / "pending" / "out.log")!r}))
        setup_logging("INFO")
        run_log = RunLog("INFO")
        print("a library print")
        os.write(2, b"a C++ log line\\n")
        logging.getLogger("pipeline.x").info("the pipeline's own line")
        logging.getLogger("ray.data").warning("Ray Data's chatter")
        run_log.open(Path({str(tmp_path / "run" / "run.log")!r}))
        subprocess.run([sys.executable, "-c", "print('an engine process line')"])
        results().write("the summary\\n")
        run_log.close()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "the pipeline's own line" in proc.stderr and proc.stdout == "the summary\n"
    for noise in ("a library print", "a C++ log line", "Ray Data's chatter", "an engine process line"):
        assert noise not in proc.stderr + proc.stdout
    log = (tmp_path / "run" / "run.log").read_text()
    for line in (
        "a library print",
        "a C++ log line",
        "the pipeline's own line",
        "Ray Data's chatter",
        "an engine process line",
    ):
        assert line in log, line
    assert not (tmp_path / "pending").exists()  # moved, and the pending folder removed
