import math

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from repro.reporting import plots


def test_length_reward_curves_are_the_basic_functions_of_figure7():
    curves = plots.length_reward_curves((0.5, 1.0), (0.5,), x_rationale=[-2, 0, 2], x_evidence=[0.0, 0.8])
    value = curves.set_index(["panel", "value", "x"])["reward"]
    assert value[("a", 0.5, 2.0)] == pytest.approx(1 / (1 + math.exp(-4)))  # σ(x/τ)
    assert value[("a", 1.0, -2.0)] == pytest.approx(1 / (1 + math.exp(2)))
    assert value[("a", 0.5, 0.0)] == 0.5
    assert value[("b", 0.5, 0.8)] == pytest.approx(math.sqrt(0.8))  # x^γ, no ω threshold
    assert value[("b", 0.5, 0.0)] == 0.0
    assert len(curves) == 2 * 3 + 1 * 2
    with pytest.raises(ValueError):
        plots.length_reward_curves(x_evidence=[1.5])


def test_writers_and_figures(tmp_path):
    frame = pd.DataFrame({"baseline": ["A", "B"], "n_cells": [6, 5], "wins": [6, 2], "ties": [0, 0],
                          "losses": [0, 3], "sign_p_holm": [0.0625, 1.0]})
    csv_path, md_path = plots.save_table(frame, tmp_path / "out", "t")
    assert pd.read_csv(csv_path).equals(frame)
    assert md_path.read_text().startswith("| baseline")
    figures = [plots.plot_cell_comparison(frame, "Ours", "demo"),
               plots.plot_length_rewards(plots.length_reward_curves((0.5,), (0.5,)), chosen={"tau": 0.5})]
    for i, fig in enumerate(figures):
        paths = plots.save_figure(fig, tmp_path / "out", f"f{i}")
        assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size > 1000 for p in paths)
        plt.close(fig)
