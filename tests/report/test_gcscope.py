"""The report's garbage-collection scope: fewer collections inside, the caller's settings after."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pytest

from benchlab.report.gcscope import YOUNG_THRESHOLD, collections_deferred


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


@pytest.fixture(autouse=True)
def _clean_collector() -> Iterator[None]:
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    (gc.enable if enabled else gc.disable)()


def test_inside_the_young_generation_is_collected_less_often_and_what_lived_before_is_frozen():
    gc.set_threshold(700, 10, 10)
    with collections_deferred():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_a_cycle_that_was_alive_before_is_collected_once_the_block_ends():
    node = Node()
    ref = weakref.ref(node)
    with collections_deferred():
        del node
        gc.collect()
        assert ref() is not None  # frozen: a collection inside does not walk it
    gc.collect()
    assert ref() is None


def test_a_cycle_made_inside_is_collected_inside():
    with collections_deferred():
        node = Node()
        ref = weakref.ref(node)
        del node
        gc.collect()
        assert ref() is None


def test_a_callers_own_freeze_is_kept_and_nothing_more_is_frozen():
    kept = Node()
    gc.freeze()
    before = gc.get_freeze_count()
    with collections_deferred():
        made = [Node() for _ in range(10)]
        # No more frozen (the count may fall by a frozen object freed meanwhile, never rise).
        assert gc.get_freeze_count() <= before
    assert gc.get_freeze_count() > 0  # still frozen, as the caller left it
    assert kept.me is kept and len(made) == 10


def test_nested_blocks_unfreeze_once_at_the_outer_end_and_restore_each_threshold():
    gc.set_threshold(900, 10, 10)
    with collections_deferred():
        outer = gc.get_freeze_count()
        made = [Node() for _ in range(100)]
        with collections_deferred():
            assert gc.get_freeze_count() >= outer + len(made)  # what the outer made since is frozen too
        assert gc.get_freeze_count() > 0  # the inner end left the unfreezing to the outer
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == (900, 10, 10)


def test_blocks_overlapping_in_two_threads_put_the_collector_back_when_the_last_ends():
    gc.set_threshold(700, 10, 10)
    entered, first_left, done = threading.Event(), threading.Event(), threading.Event()
    seen: list[tuple[int, int, int]] = []

    def second() -> None:
        with collections_deferred():
            entered.set()
            first_left.wait(10)
            seen.append(gc.get_threshold())  # the first block has ended, this one has not
        done.set()

    with collections_deferred():
        thread = threading.Thread(target=second)
        thread.start()
        assert entered.wait(10)
    first_left.set()
    assert done.wait(10)
    thread.join(10)
    assert seen == [(YOUNG_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_an_error_inside_still_restores_the_collector():
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), collections_deferred():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_a_disabled_collector_or_a_zero_threshold_is_left_as_the_caller_set_it():
    gc.set_threshold(0, 10, 10)
    with collections_deferred():
        assert gc.get_threshold() == (0, 10, 10)
    gc.set_threshold(700, 10, 10)
    gc.disable()
    with collections_deferred():
        assert gc.get_freeze_count() == 0
        assert not gc.isenabled()
        assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_a_report_leaves_the_callers_collector_as_it_found_it(tmp_path):
    from report_world import build_store_world

    from benchlab.report import write_report

    folder = build_store_world(tmp_path / "res", {("t", "a"): [0.5, 0.6], ("t", "b"): [0.7, 0.8]},
                               baseline="a", curves=True)
    gc.set_threshold(700, 10, 10)
    node = Node()
    ref = weakref.ref(node)
    del node
    files = write_report(folder, tmp_path / "rep")
    assert (tmp_path / "rep" / "plots" / "curves_score.png").exists() and files.markdown.exists()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert ref() is None  # the cycle made before the report is collected after it
