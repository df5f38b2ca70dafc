"""Stage `ablation_answer_rewards`: Table 3 (§4.3): a GRPO run per answer subset (or the main run, D165), evaluated as
Table 2; `ablation: null`: nothing trained, "not requested" recorded in both data/ outputs. Its notebook,
`notebooks/ablation_answer_rewards.ipynb`, imports this module alone; `python -m repro.ops.notebooks
ablation_answer_rewards` runs it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.reporting.paper import load_paper_tables
from repro.reporting.plots import headline, headline_line, save_figure, save_metrics, save_table
from repro.studies.ablation import REFERENCE, compare_subsets, run_ablation, summarize_ablation, table3
from repro.studies.figures import plot_ablation

__all__ = ["REFERENCE", "compare_subsets", "headline", "headline_line", "load_paper_tables", "load_profile",
           "plot_ablation", "run_ablation", "save_figure", "save_metrics", "save_table", "summarize_ablation", "table3"]
