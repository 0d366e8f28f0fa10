"""The GPU packing policy: pure accounting, checked by hand-worked cases and random sequences."""

from __future__ import annotations

from fractions import Fraction

import pytest
from gpu_trace import RECORDING
from hypothesis import given, settings
from hypothesis import strategies as st

from benchlab.errors import UserError
from benchlab.execute.gpu_double import RecordedInventory
from benchlab.execute.placement import (
    GpuDevice,
    GpuPool,
    GpuRequest,
    GpuSelection,
    longest_first,
    parse_gpus,
    pool_for,
    select_devices,
)

A100 = 81920  # MiB


def _pool(n: int = 2, **kw) -> GpuPool:
    return GpuPool([GpuDevice(i, A100, **kw) for i in range(n)])


def test_four_quarter_runs_share_one_device_and_the_fifth_opens_another():
    pool = _pool()
    got = [pool.acquire(k, GpuRequest(gpus=0.25)) for k in range(5)]
    assert [p.devices for p in got] == [(0,), (0,), (0,), (0,), (1,)]
    assert pool.reserved(0) == (Fraction(1), 0)


def test_thirds_fill_a_device_exactly():
    pool = _pool(1)
    assert all(pool.acquire(k, GpuRequest(gpus=1 / 3)) for k in range(3))
    assert pool.acquire(3, GpuRequest(gpus=1 / 3)) is None


def test_a_share_goes_to_the_fullest_device_it_fits_on():
    pool = _pool(3)
    pool.acquire("a", GpuRequest(gpus=0.5))  # device 0 at 0.5
    pool.acquire("b", GpuRequest(gpus=0.75))  # best fit: does not fit on 0, opens 1
    assert pool.holders["b"].devices == (1,)
    pool.acquire("c", GpuRequest(gpus=0.25))  # fits on 0 (0.5 spare) and 1 (0.25 spare): 1
    assert pool.holders["c"].devices == (1,)
    # Device 2 is still whole, so a whole-device run still fits.
    assert pool.acquire("d", GpuRequest(gpus=1)).devices == (2,)


def test_whole_device_runs_take_empty_devices_only():
    pool = _pool(3)
    pool.acquire("share", GpuRequest(gpus=0.1))
    assert pool.acquire("two", GpuRequest(gpus=2)).devices == (1, 2)
    assert pool.acquire("one", GpuRequest(gpus=1)) is None
    pool.release("share")
    assert pool.acquire("one", GpuRequest(gpus=1)).devices == (0,)


def test_memory_requests_respect_baseline_and_reservations():
    # 80 GiB device where another user already holds 30 GiB: 50 GiB free.
    pool = GpuPool([GpuDevice(0, A100, baseline_used_mib=30 * 1024, named=True, foreign_busy=True)])
    assert pool.acquire("a", GpuRequest(gpus=0.25, gpu_memory=40)) is not None
    assert pool.acquire("b", GpuRequest(gpus=0.25, gpu_memory=10.5)) is None  # 10 GiB left
    assert pool.acquire("c", GpuRequest(gpus=0.25, gpu_memory=10)) is not None
    assert pool.reserved(0) == (Fraction(1, 2), 50 * 1024)


def test_foreign_busy_devices_are_used_only_when_named():
    devices = [GpuDevice(0, A100, foreign_busy=True), GpuDevice(1, A100)]
    assert GpuPool(devices).usable == [1]
    named = [GpuDevice(0, A100, foreign_busy=True, named=True), GpuDevice(1, A100, named=True)]
    assert GpuPool(named).usable == [0, 1]


def test_cpu_only_runs_never_wait_for_gpus():
    pool = _pool(1)
    pool.acquire("gpu", GpuRequest(gpus=1))
    placement = pool.acquire("cpu", GpuRequest(gpus=0))
    assert placement is not None and placement.devices == ()
    assert pool.reserved(0) == (Fraction(1), 0)


def test_placement_environment_pins_device_order():
    placement = _pool(4).acquire("r", GpuRequest(gpus=2))
    assert placement.env() == {"CUDA_VISIBLE_DEVICES": "0,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_requests_that_can_never_fit_are_explained():
    pool = GpuPool([GpuDevice(0, A100), GpuDevice(1, A100, foreign_busy=True)])
    assert "needs 2 GPU(s), only 1 usable" in pool.why_never(GpuRequest(gpus=2))
    assert "needs 100 GiB free" in pool.why_never(GpuRequest(gpus=1, gpu_memory=100))
    assert pool.why_never(GpuRequest(gpus=0.5, gpu_memory=80)) is None


def test_fill_skips_what_does_not_fit_and_starts_the_rest():
    pool = _pool(2)
    queue = [("big", GpuRequest(gpus=2)), ("x", GpuRequest(gpus=1)), ("y", GpuRequest(gpus=0.5))]
    pool.acquire("running", GpuRequest(gpus=0.5))
    started = dict(pool.fill(queue))
    assert set(started) == {"x", "y"}
    assert started["y"].devices == (0,)  # next to the running share, not on a fresh device


def test_gpu_requests_are_validated():
    with pytest.raises(ValueError, match="whole number"):
        GpuRequest(gpus=1.5)
    with pytest.raises(ValueError, match="gpu_memory"):
        GpuRequest(gpus=1, gpu_memory=0)


def test_longest_first_puts_unknown_durations_in_front():
    # Hand-ordered: unknowns (2, 4) in submission order, then 30 > 20 (wide first on the tie) > 5.
    order = longest_first([20.0, 5.0, None, 20.0, None, 30.0], widths=[1, 1, 1, 2, 1, 1])
    assert order == [2, 4, 5, 3, 0, 1]


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("auto", GpuSelection("auto")),
        ("none", GpuSelection("none")),
        ("0,3,5", GpuSelection("list", (0, 3, 5))),
        (" 7 ", GpuSelection("list", (7,))),
    ],
)
def test_gpus_flag_is_parsed(flag, expected):
    assert parse_gpus(flag) == expected


@pytest.mark.parametrize("flag", ["0,x", "1,,2", "-1", "0,0"])
def test_bad_gpus_flag_is_a_user_error(flag):
    with pytest.raises(UserError, match="--gpus") as info:
        parse_gpus(flag)
    assert info.value.exit_code == 2


def test_auto_selects_free_devices_and_a_list_may_name_busy_ones():
    states = RecordedInventory(RECORDING).sample(2.0)
    auto = select_devices(parse_gpus("auto"), states)
    assert [d.index for d in auto] == [0, 2, 5, 7]
    assert not any(d.foreign_busy for d in auto)
    named = select_devices(parse_gpus("3,0"), states)
    # GPU 0's 4 MiB with no process is the driver's reserve: not the pool's, not a run's.
    assert [(d.index, d.foreign_busy, d.named, d.baseline_used_mib, d.reserved_mib) for d in named] == [
        (3, True, True, 31240, 0),
        (0, False, True, 0, 4),
    ]
    assert named[1].capacity_mib == 81920 - 4
    assert GpuPool(named).usable == [0, 3]
    assert select_devices(parse_gpus("none"), states) == []
    with pytest.raises(UserError, match="no GPU with index 9; this machine has: 0, 1, 2"):
        select_devices(parse_gpus("9"), states)


# ------------------------------------------------------------------ properties

devices_st = st.lists(
    st.tuples(
        st.sampled_from([16384, 40960, 81920]),  # memory total, MiB
        st.integers(0, 20000),  # baseline used, MiB
        st.booleans(),  # foreign busy
        st.booleans(),  # named
    ),
    min_size=1,
    max_size=6,
)
request_st = st.builds(
    GpuRequest,
    gpus=st.sampled_from([0, 0.1, 0.25, 1 / 3, 0.5, 0.75, 1, 2, 3]),
    gpu_memory=st.one_of(st.none(), st.sampled_from([1.0, 8.0, 20.0, 39.5, 70.0])),
)
ops_st = st.lists(st.one_of(request_st, st.integers(0, 50)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(devices_st, ops_st)
def test_random_request_and_finish_sequences_keep_every_invariant(raw_devices, ops):
    devices = [GpuDevice(i, t, min(b, t), f, n) for i, (t, b, f, n) in enumerate(raw_devices)]
    by_index = {d.index: d for d in devices}
    pool = GpuPool(devices)
    running: dict[int, GpuRequest] = {}
    for step, op in enumerate(ops):
        if isinstance(op, int):
            if running:
                key = sorted(running)[op % len(running)]
                pool.release(key)
                del running[key]
        else:
            placement = pool.acquire(step, op)
            if placement is None:
                _assert_really_does_not_fit(op, devices, pool, running)
            else:
                assert len(placement.devices) == op.devices
                running[step] = op
        # Invariants, recomputed from what is held, independent of the pool's counters.
        share = {i: Fraction(0) for i in by_index}
        memory = {i: 0 for i in by_index}
        for key in running:
            held = pool.holders[key]
            for i in held.devices:
                d = by_index[i]
                assert d.named or not d.foreign_busy, "foreign-held device used without being named"
                share[i] += held.share
                memory[i] += held.memory_mib
        for i, d in by_index.items():
            assert share[i] <= 1
            assert memory[i] <= d.memory_total_mib - d.baseline_used_mib


def _assert_really_does_not_fit(req, devices, pool, running):
    """A refused request must not fit anywhere, computed from the holders alone."""
    assert req.gpus > 0, "CPU-only runs are never refused"
    share = {d.index: Fraction(0) for d in devices}
    memory = {d.index: 0 for d in devices}
    for key in running:
        held = pool.holders[key]
        for i in held.devices:
            share[i] += held.share
            memory[i] += held.memory_mib
    need = Fraction(req.gpus).limit_denominator(1000) if req.gpus < 1 else Fraction(1)
    room = [
        d
        for d in devices
        if (d.named or not d.foreign_busy)
        and (share[d.index] + need <= 1 if req.gpus < 1 else share[d.index] == 0)
        and d.memory_total_mib - d.baseline_used_mib - memory[d.index] >= req.memory_mib
    ]
    assert len(room) < req.devices


def test_pool_for_applies_the_flag_to_the_inventory():
    states = RecordedInventory(RECORDING).sample(2.0)
    assert pool_for("auto", states).usable == [0, 2, 5, 7]
    assert pool_for("1,3", states).usable == [1, 3]
    assert pool_for("none", states).usable == []


def test_request_is_read_from_spec_resources():
    from benchlab.spec import Resources

    assert GpuRequest.of(Resources(gpus=0.25, gpu_memory=18)) == GpuRequest(0.25, 18)
    assert GpuRequest.of(Resources()).devices == 0


def test_a_tiny_share_still_counts():
    pool = _pool(1)
    assert pool.acquire("tiny", GpuRequest(gpus=0.0001)) is not None
    assert pool.reserved(0)[0] == Fraction(1, 1000)
    assert pool.acquire("whole", GpuRequest(gpus=1)) is None
