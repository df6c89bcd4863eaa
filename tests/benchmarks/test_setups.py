"""What ``make bench-judge`` and ``make bench-reasoning`` judge, made as they make it: the real workflow on SummEval up
to its shards (no engine starts), in a process of its own (a benchmark takes over its process's output). Both
benchmarks share bench-judge's setup; bench-reasoning's arguments once lacked one bench-judge had gained, and
``make bench-reasoning`` stopped before it measured anything."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPT = """
import json, random, sys
import pyarrow as pa
from benchmarks import judge, reasoning
from benchmarks.timing import in_order

args = reasoning.parse_args(["--candidates", "3", "--verbose"])
s = judge.prepare(reasoning.replace_args(args, ["judge.reasoning.enabled=true"]))
args = judge.parse_args(["--contexts", "1", "--variant", "judge.batch_size=4", "--verbose", "dataset.max_candidates=3"])
v = judge.prepare(args, args.variant)
# the pipeline's answers come in any order: read back in the prompts' order
rows = v.pairs.append_column("token_logprobs", pa.array([[float(k)] for k in range(v.pairs.num_rows)]))
order = list(range(rows.num_rows))
random.Random(0).shuffle(order)
back = in_order(rows.take(order), v.pairs)
print(json.dumps({
    "reasoning": [s.pairs.num_rows, s.cfg.judge.reasoning.enabled, s.variant is None],
    "variant": [v.variant.overrides, v.variant.cfg.judge.batch_size, v.cfg.judge.batch_size, v.variant.pairs is v.pairs],
    "in_order": back[:, 0].tolist() == list(range(rows.num_rows)),
}))
"""


@pytest.mark.slow
def test_bench_judge_and_bench_reasoning_prepare_what_they_judge(datasets):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    # one SummEval article, 3 candidates, both orderings: 6 prompts, with reasoning on, no variant
    assert got["reasoning"] == [6, True, True]
    # the variant's overrides on top of the others, the same prompts
    assert got["variant"][:2] == [["judge.batch_size=4"], 4] and got["variant"][2] != 4 and got["variant"][3]
    assert got["in_order"]
