"""One run at a time per run folder: a run started on a folder another process holds (a rerun started while the first
still runs) is refused at once naming that process, before anything is judged; once the holder is killed (a crash
leaves nothing held) the same command runs. The run holds the folder with a POSIX lock, which the processes it forks
do not inherit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.contracts.errors import UserError
from pipeline.run.context import run
from pipeline.run.lock import LOCK_FILE, holder, run_folder_lock
from tests.conftest import ROOT, compose

HOLD = """
import sys, time
from pathlib import Path
from pipeline.run.lock import run_folder_lock
with run_folder_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_second_run_on_a_held_folder_is_refused_and_a_killed_holder_leaves_it_free(tmp_path):
    folder = tmp_path / "run"
    (folder / "tables").mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        overrides = [
            "experiment=judgebench_recorded",
            "runtime=inprocess",
            "tracking.plots=false",
            "jury.judges=[]",
            f"paths.output_root={tmp_path}",
            f"paths.run_dir={folder}",
        ]
        with pytest.raises(
            UserError, match=rf"run folder {folder} is in use by another run \(process {holder.pid}\)"
        ):
            run(compose(overrides))
        assert not list(folder.glob("judgments/*.parquet"))  # nothing judged
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    result = run(compose(overrides))  # the killed holder left nothing held
    assert result.judge_stats.judged_now > 0 and (folder / LOCK_FILE).read_text().strip() == str(os.getpid())


def test_a_forked_child_does_not_hold_the_folder_after_its_parent_is_gone(tmp_path):
    """An engine forked by a run that was killed (an orphan still running) does not keep the next run out."""
    folder = tmp_path / "run"
    folder.mkdir()
    script = HOLD.replace(
        'print("held", flush=True)',
        'import os\n    if os.fork() == 0:\n        time.sleep(600)\n    print("held", flush=True)',
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(folder)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout.readline().strip() == "held"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    time.sleep(0.2)
    with run_folder_lock(folder):  # the orphan child holds nothing
        pass
    subprocess.run(["pkill", "-f", f"{folder}"], check=False)


def test_a_link_planted_as_the_lock_is_refused_and_its_target_never_written(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_FILE).symlink_to(target)
    with pytest.raises(UserError, match="is a symbolic link, not a lock file"):
        with run_folder_lock(folder):
            pass
    assert target.read_text() == "keep me\n"
    assert holder(folder) is None


def test_the_holding_process_asking_about_its_folder_keeps_it(tmp_path):
    """A notebook that runs a pipeline and lists the runs: asking must not release the lock (POSIX releases a
    process's lock when it closes any descriptor of the file)."""
    folder = tmp_path / "run"
    folder.mkdir()
    probe = "import sys; from pathlib import Path; from pipeline.run.lock import holder; print(holder(Path(sys.argv[1])))"
    with run_folder_lock(folder):
        assert holder(folder) == str(os.getpid())
        assert holder(folder) == str(os.getpid())  # asked twice: still held
        seen = subprocess.run(
            [sys.executable, "-c", probe, str(folder)], cwd=ROOT, capture_output=True, text=True
        )
        assert seen.stdout.strip() == str(os.getpid()), seen.stderr
        with pytest.raises(UserError, match="in use by another run of this process"):
            with run_folder_lock(folder):
                pass
    assert holder(folder) is None


def test_another_users_lock_is_read_without_writing_it(tmp_path):
    """The lister runs as another user (nobody): the lock file (0644, the run's) is read only, never opened for
    writing, and the run holding it is reported."""
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="lock-"))
    try:
        shared.chmod(0o755)
        folder = shared / "run"
        folder.mkdir()
        folder.chmod(0o755)
        probe = (
            "import os, sys; from pathlib import Path; from pipeline.run.lock import holder; "
            "os.setgid(65534); os.setuid(65534); print(holder(Path(sys.argv[1])))"
        )
        with run_folder_lock(folder):
            before = (folder / LOCK_FILE).stat()
            seen = subprocess.run(
                [sys.executable, "-c", probe, str(folder)], cwd=ROOT, capture_output=True, text=True
            )
            assert seen.returncode == 0, seen.stderr
            assert seen.stdout.strip() == str(os.getpid())
            assert (folder / LOCK_FILE).stat().st_mtime_ns == before.st_mtime_ns
    finally:
        shutil.rmtree(shared)
