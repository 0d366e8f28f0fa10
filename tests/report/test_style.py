from typing import get_type_hints

from benchlab.report.style import LineStyle, style


def test_each_config_gets_an_okabe_ito_colour_then_a_new_dash_once_the_eight_colours_are_used():
    # Okabe and Ito's palette starts blue (#0072B2), orange (#E69F00); its eighth is yellow (#F0E442).
    assert style(0) == {"color": "#0072B2", "linestyle": "-"}
    assert style(1) == {"color": "#E69F00", "linestyle": "-"}
    assert style(7) == {"color": "#F0E442", "linestyle": "-"}
    assert style(8) == {"color": "#0072B2", "linestyle": "--"}
    assert set(style(3)) == set(get_type_hints(LineStyle))
