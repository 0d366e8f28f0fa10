from math import comb, prod

import pytest

from benchlab.evaluate.metrics import SampleScore, aggregate, flatten, majority_answer, pass_at_k


def _stable_pass_at_k(n: int, c: int, k: int) -> float:
    # The product form of Chen et al. (2021): 1 - prod_{i=n-c+1}^{n} (1 - k / i).
    if n - c < k:
        return 1.0
    return 1.0 - prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def test_pass_at_k_matches_hand_computed_values():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # k=1 is the fraction correct
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)
    assert pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(4, 1, 4) == 1.0


@pytest.mark.parametrize("n", [1, 2, 5, 8, 16, 64])
def test_pass_at_k_matches_the_closed_form_for_every_c_and_k(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            closed = 1 - comb(n - c, k) / comb(n, k)
            assert pass_at_k(n, c, k) == pytest.approx(closed, abs=1e-12)
            assert pass_at_k(n, c, k) == pytest.approx(_stable_pass_at_k(n, c, k), abs=1e-9)


def test_pass_at_k_rejects_impossible_arguments():
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def S(answer, correct):
    return SampleScore(answer, correct)


def test_majority_picks_the_most_frequent_answer_and_first_seen_on_ties():
    assert majority_answer([S("1", False), S("2", True), S("2", True)]).answer == "2"
    assert majority_answer([S("3", False), S("4", True)]).answer == "3"
    assert majority_answer([S(None, False), S("5", True), S(None, False)]).answer == "5"
    assert majority_answer([S(None, False)]) is None


def test_aggregate_by_hand_for_two_prompts_of_four_samples():
    prompts = [
        [S("7", True), S("7", True), S("8", False), S(None, False)],  # c=2, majority 7 (right)
        [S("1", False), S("1", False), S("2", True), S(None, False)],  # c=1, majority 1 (wrong)
    ]
    m = aggregate(prompts)
    assert set(m) == {"pass@1[avg-of-4]", "majority@4", "pass@2", "pass@4"}
    assert m["pass@1[avg-of-4]"]["accuracy"] == pytest.approx((2 / 4 + 1 / 4) / 2)
    assert m["pass@1[avg-of-4]"]["no_answer"] == pytest.approx(0.25)
    assert m["majority@4"]["accuracy"] == pytest.approx(0.5)
    # pass@2: prompt 1: 1 - C(2,2)/C(4,2) = 5/6; prompt 2: 1 - C(3,2)/C(4,2) = 1/2
    assert m["pass@2"]["accuracy"] == pytest.approx((5 / 6 + 1 / 2) / 2)
    assert m["pass@4"]["accuracy"] == 1.0
    assert m["pass@4"]["num_entries"] == 2.0


def test_aggregate_with_one_sample_reports_only_pass_at_1():
    m = aggregate([[S("a", True)], [S(None, False)], [S("b", False)]])
    assert list(m) == ["pass@1"]
    assert m["pass@1"]["accuracy"] == pytest.approx(1 / 3)
    assert m["pass@1"]["no_answer"] == pytest.approx(1 / 3)


def test_aggregate_of_nothing_is_empty_and_flatten_joins_keys():
    assert aggregate([]) == {}
    flat = flatten({"b": {"pass@1": {"accuracy": 0.5, "note": "x"}}})
    assert flat == {"b/pass@1/accuracy": 0.5}
