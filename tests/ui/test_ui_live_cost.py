"""What an open dashboard costs a live sweep: a costly view is made again at most as often as its
share of a core allows, and a page that already shows the newest version gets nothing to render."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from benchlab.ledger import Store

if TYPE_CHECKING:
    from starlette.testclient import TestClient


class _Clocks:
    """The cache's wall clock and CPU clock, moved by hand."""

    def __init__(self) -> None:
        self.wall = 100.0
        self.cpu = 0.0

    def now(self) -> float:
        return self.wall

    def cpu_now(self) -> float:
        return self.cpu


def _costly(clocks: _Clocks, cost: float, made: list[int]) -> Callable[[], int]:
    def make() -> int:
        clocks.cpu += cost
        made.append(len(made))
        return len(made)
    return make


def test_a_view_that_costs_a_tenth_of_a_second_is_made_again_at_most_every_two_seconds():
    from benchlab.ui.app import _Cache

    clocks = _Clocks()
    cache = _Cache(clock=clocks.now, cpu_clock=clocks.cpu_now, share=0.05)
    made: list[int] = []
    make = _costly(clocks, 0.1, made)
    assert cache.get(("grid",), 1, make) == (1, 1)
    # The benchmark moves on at every look; the view stays as made for 0.1 / 0.05 = 2 s.
    clocks.wall += 1.9
    assert cache.get(("grid",), 2, make) == (1, 1)
    clocks.wall += 0.2
    assert cache.get(("grid",), 3, make) == (3, 2)
    assert len(made) == 2


def test_a_cheap_view_follows_every_change_and_the_floor_still_holds():
    from benchlab.ui.app import _Cache

    clocks = _Clocks()
    cache = _Cache(clock=clocks.now, cpu_clock=clocks.cpu_now, share=0.05)
    made: list[int] = []
    make = _costly(clocks, 0.001, made)  # 20 ms of freshness at most
    cache.get(("grid",), 1, make)
    clocks.wall += 0.05
    assert cache.get(("grid",), 2, make)[0] == 2
    # A floor given by the caller (the report's tables: 5 s) wins over a shorter share.
    cache.get(("numbers",), 2, make, fresh_for=5.0)
    clocks.wall += 4.0
    assert cache.get(("numbers",), 3, make, fresh_for=5.0)[0] == 2
    # An unchanged version is never made again, however old.
    clocks.wall += 3600
    before = len(made)
    assert cache.get(("grid",), 2, make)[0] == 2
    assert len(made) == before


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    from starlette.testclient import TestClient

    from benchlab.names.benchmark_info import BenchmarkInfo
    from benchlab.ui.app import create_app
    from benchlab.ui.library import Library

    folder = tmp_path / "out"
    with Store.create(folder) as store:
        store.set_benchmark(BenchmarkInfo(name="tiny", primary="score", goal={"score": "max"}, baseline=None,
                                          configs=["a"], tasks=["t"]))
    with TestClient(create_app(Library([folder]), warm_up=False)) as client:
        yield client


@pytest.mark.parametrize("path", ["/b/out?fragment=1", "/b/out/curves?fragment=1", "/?fragment=1", "/b/out/numbers"])
def test_a_page_that_shows_the_newest_version_gets_204_and_an_older_one_the_content(client: TestClient,
                                                                                     path: str):
    first = client.get(path)
    assert first.status_code == 200 and first.text
    version = first.headers["X-Version"]
    same = client.get(f"{path}{'&' if '?' in path else '?'}have={version}")
    assert same.status_code == 204 and same.content == b""
    assert same.headers["X-Version"] == version
    older = client.get(f"{path}{'&' if '?' in path else '?'}have={int(version) - 1}")
    assert older.status_code == 200 and older.text == first.text


def test_a_full_page_is_served_whatever_version_it_names(client: TestClient):
    version = client.get("/b/out?fragment=1").headers["X-Version"]
    page = client.get(f"/b/out?have={version}")
    assert page.status_code == 200 and "<html" in page.text
