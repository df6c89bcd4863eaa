"""How many workers a cluster has room for (pipeline.runtime.capacity): the pool never takes the CPU slot its own
tasks need, and a pool that would is refused with the numbers and the fix, before it starts. Pure arithmetic:
no Ray."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.runtime.capacity import Resources, fits, refusal, room, shortfall


def test_the_issues_stalled_pool_runs_with_what_fits_and_says_so_with_the_fix():
    # two worker nodes of one CPU slot each, two judge workers of one CPU: the prompt tasks (0.25) would get no
    # slot: the pool runs with one worker beside them and says why, with the numbers and the fix
    assert fits(Resources(cpus=2), Resources(cpus=1), 0.25) == 1
    assert refusal("judge", Resources(cpus=2), Resources(cpus=1), least=2, reserve_cpus=0.25) is None
    message = shortfall("judge", Resources(cpus=2), Resources(cpus=1), least=2, reserve_cpus=0.25)
    assert "2 worker(s) of 1 CPU(s) each would take 2 of the cluster's 2 CPU slot(s), leaving 0" in message
    assert "which need 0.25: it runs with 1" in message
    assert "at most 1 worker(s)" in message and "0.87 CPU(s) per worker or fewer" in message
    assert "judge.num_actors" in message and "[1, N]" in message


def test_a_pool_of_which_not_one_worker_fits_beside_its_tasks_is_refused():
    message = refusal("judge", Resources(cpus=1), Resources(cpus=1), least=1, reserve_cpus=0.25)
    assert (
        message is not None
        and "nothing would run" in message
        and "0.75 CPU(s) per worker or fewer" in message
    )
    assert refusal("judge", Resources(cpus=2), Resources(cpus=0.5), least=2, reserve_cpus=0.25) is None
    # a worker that needs no CPU slot (an API judge with num_cpus_per_actor=0) leaves every slot to the tasks
    assert refusal("judge", Resources(cpus=0), Resources(cpus=0), least=4, reserve_cpus=0.25) is None


def test_gpus_bound_the_room_as_cpus_do():
    assert fits(Resources(cpus=64, gpus=4), Resources(cpus=2, gpus=1), 0.25) == 4
    assert fits(Resources(cpus=64, gpus=0), Resources(cpus=2, gpus=1), 0.25) == 0
    assert room(Resources(cpus=64, gpus=4), Resources(cpus=2, gpus=1), 0.25, have=3, most=8) == 4
    assert room(Resources(cpus=64, gpus=4), Resources(cpus=2, gpus=1), 0.25, have=7, most=8) == 1


@given(
    free=st.floats(0, 64),
    cpus=st.floats(0.05, 8),
    reserve=st.sampled_from([0.0, 0.25, 1.0]),
    have=st.integers(0, 10),
    most=st.integers(1, 12),
)
def test_room_never_takes_the_reserve_nor_passes_the_most(free, cpus, reserve, have, most):
    add = room(Resources(cpus=free), Resources(cpus=cpus), reserve, have, most)
    assert 0 <= add <= max(0, most - have)
    if add:
        assert add * cpus + reserve <= free + 1e-6
    # one more would not fit, unless the most stopped it
    if add < most - have:
        assert (add + 1) * cpus + reserve > free - 1e-6
