"""Shared test set-up."""

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The tests use small tensors: one thread is faster than two threads contending for 2 cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def close_figures():
    """Every figure a test draws is closed after it (the plot tests draw hundreds)."""
    yield
    plt.close("all")
