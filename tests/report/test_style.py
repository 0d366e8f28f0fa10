from typing import get_type_hints

import pytest

from benchlab.report.style import LineStyle, style


def test_each_config_gets_an_okabe_ito_colour_then_a_new_dash_once_the_eight_colours_are_used():
    # Okabe and Ito's palette starts blue (#0072B2), orange (#E69F00); its eighth is yellow (#F0E442).
    assert style(0) == {"color": "#0072B2", "linestyle": "-"}
    assert style(1) == {"color": "#E69F00", "linestyle": "-"}
    assert style(7) == {"color": "#F0E442", "linestyle": "-"}
    assert style(8) == {"color": "#0072B2", "linestyle": "--"}
    assert set(style(3)) == set(get_type_hints(LineStyle))


@pytest.mark.parametrize(("x", "y"), [
    ([0.0, 1e6], [0.0, 0.93]),  # steps and a score: the learning curves' panels
    ([0.71, 0.97], [-0.4, 9.4]),  # the scores' panels: values across, configs down
    ([-3.2, 17.0], [1e-4, 3e-4]),  # an axis with an offset / scale text
])
def test_grid_panels_make_no_tick_outside_the_view_and_draw_the_same_picture(x, y):
    import io

    from matplotlib.ticker import AutoLocator

    from benchlab.report.style import grid_figure

    def picture(default_locator: bool) -> tuple[bytes, list[float]]:
        fig, (ax,) = grid_figure(1)
        if default_locator:
            ax.xaxis.set_major_locator(AutoLocator())
            ax.yaxis.set_major_locator(AutoLocator())
        ax.plot(x, y)
        ax.grid(alpha=0.3)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=50)
        return buf.getvalue(), [float(v) for v in ax.xaxis.get_majorticklocs()]

    ours, locs = picture(False)
    default, default_locs = picture(True)
    low, high = sorted(x)
    low, high = low - 0.05 * (high - low), high + 0.05 * (high - low)  # matplotlib's default margins
    assert locs == [v for v in default_locs if low - 1e-9 * (high - low) <= v <= high + 1e-9 * (high - low)]
    assert len(locs) < len(default_locs)  # the default places ticks outside the view, made for nothing
    assert ours == default
