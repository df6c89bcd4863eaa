"""The local Ray a run starts (pipeline.runtime.ray_data.init_ray): no worker process ahead of the work unless
``runtime.prestart_workers`` asks for Ray's default (a worker per CPU as the driver connects). Real local Rays, in
a process of their own (this test process may already be connected to the session's Ray)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, os, sys, time
import ray
from pipeline.config.run import RuntimeConfig
from pipeline.judge.hosting.watchdog import descendants
from pipeline.runtime.ray_data import init_ray


def workers():
    # Ray's workers (ray::IDLE, ray::Worker...): not its agents (ray::DashboardAgent, ray::RuntimeEnvAgent) nor
    # the raylet, whose command line holds the workers' (default_worker.py)
    names = [text.split(" ", 1)[0] for _, text in descendants(os.getpid())]
    return sum(name.startswith("ray::") and "Agent" not in name for name in names)


@ray.remote(num_cpus=1)
class Worker:
    def pid(self):
        return os.getpid()


counts = {}
for prestart in (False, True):
    init_ray(RuntimeConfig(num_cpus=2, prestart_workers=prestart))
    time.sleep(4)  # prestarted workers are up within a second or two of the driver connecting
    idle = workers()
    # an actor with an environment of its own, as a judge's: its worker is started for it
    actor = Worker.options(runtime_env={"env_vars": {"CA_PROBE": "1"}}).remote()
    ray.get(actor.pid.remote())
    counts[str(prestart)] = {"before": idle, "with_actor": workers()}
    ray.shutdown()
print(json.dumps(counts))
"""


def test_the_local_ray_starts_no_idle_worker_unless_asked():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, check=True
    )
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    # the product's default: nothing but the actor's own worker, started when the actor is
    assert counts["False"] == {"before": 0, "with_actor": 1}
    # Ray's default: a worker per CPU ahead of any work; beside the actor, which needed one of its own, one stays
    # idle (the raylet keeps idle workers up to one per CPU)
    assert counts["True"]["before"] == 2
    assert counts["True"]["with_actor"] == 2
