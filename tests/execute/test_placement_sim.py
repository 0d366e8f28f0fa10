"""bench/packing_sim.py's simulators on cases small enough to work out by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).parents[2] / "bench" / "packing_sim.py"
_spec = importlib.util.spec_from_file_location("packing_sim", _PATH)
assert _spec is not None and _spec.loader is not None
sim = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("packing_sim", sim)  # dataclasses look their module up there
_spec.loader.exec_module(sim)

R = sim.SimRun


def test_pool_simulation_shares_halves_and_backfills():
    # One device: the whole run 0..10, then the two halves together 10..20.
    runs = [R(10, 1.0), R(10, 0.5), R(10, 0.5)]
    assert sim.simulate_pool(runs, [0, 1, 2], n_devices=1) == 20
    assert sim.lower_bound(runs, n_devices=1) == 20


def test_longest_first_beats_submission_order_on_the_classic_case():
    # Two devices, durations 1,1,2 submitted short first: FIFO ends at 3, longest first at 2.
    runs = [R(1, 1.0), R(1, 1.0), R(2, 1.0)]
    assert sim.simulate_pool(runs, [0, 1, 2], n_devices=2) == 3
    assert sim.simulate_pool(runs, sim.longest_first([1, 1, 2]), n_devices=2) == 2


def test_round_robin_runs_each_gpu_queue_serially():
    # Two GPUs: runs 0 and 2 on GPU 0 (5 + 1), run 1 on GPU 1 (1), then the 2-GPU run 3
    # waits for both queues (until 6) and lasts 2.
    runs = [R(5, 1.0), R(1, 1.0), R(1, 0.5), R(2, 2.0)]
    assert sim.simulate_round_robin(runs, n_devices=2) == 8


def test_a_run_wider_than_the_machine_is_an_error():
    with pytest.raises(RuntimeError, match="can never start"):
        sim.simulate_pool([R(1, 2.0)], [0], n_devices=1)


def test_seeded_runs_are_reproducible_and_mixed():
    runs = sim.make_runs(3)
    assert runs == sim.make_runs(3) and len(runs) == 48
    assert {r.gpus for r in runs} == {0.5, 1.0, 2.0}
