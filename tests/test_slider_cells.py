"""The slider notebooks keep the cell the JupyterLab browser test drives (tests/test_site.py, not run without a
browser): each of WIDGET_NOTEBOOKS has a code cell calling ipywidgets' interact, checked here on the committed
notebooks so that a rewritten slider cell fails in the unit tests, not only in the browser stage."""

import json
from pathlib import Path

import pytest
from test_site import WIDGET_NOTEBOOKS, slider_cell

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


@pytest.mark.parametrize("number", WIDGET_NOTEBOOKS)
def test_each_slider_notebook_has_its_slider_cell(number):
    (path,) = NOTEBOOKS.glob(f"{number}_*.ipynb")
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert nb["cells"][slider_cell(nb, path.name)]["cell_type"] == "code"


def test_a_notebook_without_a_slider_cell_is_named_in_the_error():
    nb = {"cells": [{"cell_type": "code", "source": "widgets.interactive(f, x=1)"}]}
    with pytest.raises(AssertionError, match="08_spa_and_lpr.ipynb has no code cell calling widgets.interact"):
        slider_cell(nb, "08_spa_and_lpr.ipynb")
