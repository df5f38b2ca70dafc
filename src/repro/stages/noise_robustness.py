"""Stage `noise_robustness`: Figure 5 (§4.6): the same questions with 0, 2, ... irrelevant passages added. Its notebook,
`notebooks/noise_robustness.ipynb`, imports this module alone; `python -m repro.ops.notebooks noise_robustness` runs
it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.evaluation.tables import reference_label, summarize_files
from repro.reporting.plots import headline, headline_line, save_figure, save_metrics, save_plot_data, save_table
from repro.studies.comparison import run_noise_robustness
from repro.studies.figures import plot_noise_robustness

__all__ = ["headline", "headline_line", "load_profile", "plot_noise_robustness", "reference_label",
           "run_noise_robustness", "save_figure", "save_metrics", "save_plot_data", "save_table", "summarize_files"]
