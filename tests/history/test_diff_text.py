"""`benchlab diff`'s Markdown: numbers at the precision their interval supports, as the report
writes them, and each move said as better or worse by the metric's goal (a ratio of two negative
rewards, −484 / −406 = 1.19, reads like a gain)."""

from __future__ import annotations

from benchlab.history.diff import NO_CHANGE, REGRESSION, Change, VersionDiff
from benchlab.history.diff_text import csv_rows, to_markdown
from benchlab.stats.versions import VersionAnalysis


def _change(metric: str, goal: str, before: tuple[float, float], after: tuple[float, float],
            ci: tuple[float, float], verdict: str) -> Change:
    (mb, sb), (ma, sa) = before, after
    return Change("t", "a", metric, goal, True, 8, 8, mb, ma, sb, sa, ma - mb, ci[0], ci[1], 0.2, 0.2, verdict,
                  ma / mb, ())


def _diff(*changes: Change) -> VersionDiff:
    analysis = VersionAnalysis(before="v1", after="v2", changes=changes, only_before=(), only_after=(), alpha=0.05,
                               summary="final")
    return VersionDiff(code=[], spec=[], packages=[], datasets=[], analysis=analysis)


def _row(text: str, metric: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith("|") and f"/{metric} (" in line)
    return [c.strip() for c in line.strip("|").split("|")]


def test_a_reward_that_fell_is_worse_and_its_numbers_are_at_their_intervals_precision():
    # Reward (goal max) from -406 to -484: the change's 95% CI [-210, +54] has half-width 132, so
    # whole numbers (two significant digits of 132); the ratio 1.19 would hide that it fell.
    reward = _change("reward", "max", (-406.0, 151.3), (-484.2, 160.8), (-210.4, 54.1), NO_CHANGE)
    # A large score: 5398 with std 1100 and a CI half-width of 900 is written 5398 ± 1100, no 1.1e+03.
    big = _change("frames", "max", (5398.2, 1100.0), (5712.9, 1200.0), (-590.0, 1219.0), NO_CHANGE)
    # Goal min: a loss that went up is worse; its CI half-width 0.004 gives three decimals.
    loss = _change("loss", "min", (0.2512, 0.0031), (0.2601, 0.0042), (0.0049, 0.0129), REGRESSION)
    text = to_markdown(_diff(reward, big, loss))
    mark, before, after, ci, moved, _, _ = _row(text, "reward")
    assert (before, after, ci) == ("-406 ± 151", "-484 ± 161", "-78 [-210, +54]")
    assert moved == "worse by 78 (19%)"
    assert _row(text, "frames")[1:5] == ["5398 ± 1100", "5713 ± 1200", "+315 [-590, +1219]", "better by 315 (6%)"]
    assert _row(text, "loss")[1:5] == ["0.2512 ± 0.0031", "0.2601 ± 0.0042", "+0.0089 [+0.0049, +0.0129]",
                                       "worse by 0.0089 (4%)"]
    assert "e+0" not in text and "ratio" not in text.split("## Regressions")[0]
    rows = {r.metric: r for r in csv_rows(_diff(reward, loss))}
    assert (rows["reward"].direction, rows["loss"].direction) == ("worse", "worse")
    assert rows["reward"].relative_change is not None and rows["reward"].relative_change < 0
