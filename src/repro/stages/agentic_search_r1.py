"""Stage `agentic_search_r1`: Tables 5-6 (§4.7-4.8, Algorithm 2): the agents without/with the extractor; per-item
trajectories. Its notebook, `notebooks/agentic_search_r1.ipynb`, imports this module alone; `python -m
repro.ops.notebooks agentic_search_r1` runs it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.io import write_text
from repro.reporting.plots import headline, headline_line, save_figure, save_metrics, save_table
from repro.studies.agentic import (agentic_config, compare_conditions, evaluation_examples, extractor_ref, model_label,
                                   plot_study, read_trajectories, run_study, table5_layout, table5_tidy, table6_layout,
                                   table6_tidy)
from repro.studies.agentic_cases import cases_html, pair_trajectories, pick_cases

__all__ = ["agentic_config", "cases_html", "compare_conditions", "evaluation_examples", "extractor_ref", "headline",
           "headline_line", "load_profile", "model_label", "pair_trajectories", "pick_cases", "plot_study",
           "read_trajectories", "run_study", "save_figure", "save_metrics", "save_table", "table5_layout",
           "table5_tidy", "table6_layout", "table6_tidy", "write_text"]
