"""The clean-up re-encodes stored figures losslessly (helpers.course.output_cleanup.smaller_png): the same pixels in
fewer bytes, never a changed image, and nothing done to an image it cannot shrink."""

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from helpers.course import output_cleanup  # noqa: E402


def _figure_png() -> str:
    """A figure as the inline backend stores it: an RGBA PNG, every pixel opaque, base64 with a trailing newline."""
    figure, ax = plt.subplots(figsize=(4, 3))
    x = np.linspace(0, 1, 200)
    ax.plot(x, x**2, label="a")
    ax.fill_between(x, x**2 - 0.1, x**2 + 0.1, alpha=0.3)
    ax.legend()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii") + "\n"


def _pixels(encoded: str) -> np.ndarray:
    with Image.open(io.BytesIO(base64.b64decode(encoded))) as image:
        return np.asarray(image.convert("RGBA"))


def test_an_opaque_figure_is_stored_smaller_with_the_same_pixels():
    stored = _figure_png()
    smaller = output_cleanup.smaller_png(stored)
    assert len(smaller) < len(stored)
    assert np.array_equal(_pixels(smaller), _pixels(stored))
    assert smaller.endswith("\n")
    assert output_cleanup.smaller_png(smaller) == smaller  # cleaning twice changes nothing


def test_a_figure_with_transparent_pixels_keeps_its_alpha():
    rgba = np.zeros((20, 30, 4), dtype=np.uint8)
    rgba[..., 0] = 200
    rgba[..., 3] = 255
    rgba[5:10, 5:10, 3] = 0  # a transparent patch: dropping alpha would paint it
    buffer = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buffer, "PNG")
    stored = base64.b64encode(buffer.getvalue()).decode("ascii")
    assert np.array_equal(_pixels(output_cleanup.smaller_png(stored)), rgba)


def test_clean_notebook_shrinks_the_figures_of_a_code_cell():
    stored = _figure_png()
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {"tags": []},
                "source": "plot()",
                "execution_count": 1,
                "outputs": [{"output_type": "display_data", "metadata": {}, "data": {"image/png": stored}}],
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    cleaned, report = output_cleanup.clean_notebook(nb)
    shown = cleaned["cells"][0]["outputs"][0]["data"]["image/png"]
    assert report["bytes_after"] < report["bytes_before"]
    assert np.array_equal(_pixels(shown), _pixels(stored))
    assert nb["cells"][0]["outputs"][0]["data"]["image/png"] == stored  # the input notebook is not changed
