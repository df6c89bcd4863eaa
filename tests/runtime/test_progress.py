"""Progress of the judge stage: the rate after the first batch, and said so when only start-up is known."""

from __future__ import annotations

from pipeline.runtime.progress import Progress, format_seconds


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_excludes_engine_start_up_once_there_is_a_second_batch():
    clock = Clock()
    progress = Progress(300, every_seconds=0.0, clock=clock)
    clock.now = 40.0  # engine start-up, then the first batch
    progress.update(100, prompt_tokens=1000, cached_tokens=500)
    assert "2.50/s with engine start-up" in progress.line()
    clock.now = 60.0
    progress.update(100, prompt_tokens=1000, cached_tokens=900)
    line = progress.line()
    assert "200/300" in line and "5.00/s," in line and "ETA 20s" in line and "prefix cache 70%" in line
    assert progress.overall_rate() == 200 / 60


def test_format_seconds():
    assert [format_seconds(s) for s in (5, 65, 3725, float("nan"))] == ["5s", "1m05s", "1h02m05s", "?"]
