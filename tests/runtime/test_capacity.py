"""How many workers a cluster has room for (pipeline.runtime.capacity): the pool never takes the CPU slot its own
tasks need, and a pool that would is refused with the numbers and the fix, before it starts. Pure arithmetic:
no Ray."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.runtime.capacity import Resources, fits, refusal, room, shortfall, spread_to


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


@given(
    nodes=st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 2), st.integers(0, 5)), min_size=0, max_size=6
    ),
    gpus=st.sampled_from([0.0, 1.0]),
)
def test_spread_to_puts_a_worker_where_the_fewest_are_and_never_past_a_nodes_total(nodes, gpus):
    """Placing workers one by one with :func:`spread_to` fills every node up to what its total holds, never past it,
    and keeps the pool even: no node gets a worker while another that holds one more has fewer. Node names do not
    change the counts per node (placement depends on the names only to break ties)."""
    need = Resources(cpus=1.0, gpus=gpus)
    totals = {f"n{k}": Resources(cpus=c, gpus=g) for k, (c, g, _) in enumerate(nodes)}
    workers = {f"n{k}": min(w, fits(totals[f"n{k}"], need, 0.0)) for k, (_, _, w) in enumerate(nodes)}
    while (node := spread_to(totals, workers, need)) is not None:
        open_ = [n for n in totals if fits(totals[n], need, 0.0) > workers[n]]
        assert workers[node] == min(workers[n] for n in open_)
        workers[node] += 1
        assert workers[node] <= fits(totals[node], need, 0.0)
    assert all(workers[n] == fits(totals[n], need, 0.0) for n in totals)


def test_spread_to_the_issues_two_nodes_one_worker_each_before_a_second_anywhere():
    """Two worker nodes of 2 CPUs and a head of none: the first two workers go one to each node."""
    totals = {"head": Resources(), "a": Resources(cpus=2), "b": Resources(cpus=2)}
    first = spread_to(totals, {}, Resources(cpus=1))
    second = spread_to(totals, {first: 1}, Resources(cpus=1))
    assert {first, second} == {"a", "b"}
    assert spread_to(totals, {"a": 2, "b": 2}, Resources(cpus=1)) is None
