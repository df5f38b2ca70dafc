"""Stage `reward_designs`: issue #18: one GRPO run per reward-design row, each evaluated like Table 2's EviOmni column.
Its notebook, `notebooks/reward_designs.ipynb`, imports this module alone; `python -m repro.ops.notebooks
reward_designs` runs it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.reporting.plots import headline, headline_line, save_figure, save_metrics, save_table
from repro.studies.figures import plot_reward_designs
from repro.studies.reward_designs import (REFERENCE, compare_designs, design_table, run_reward_designs, score_evidence,
                                          summarize_designs)

__all__ = ["REFERENCE", "compare_designs", "design_table", "headline", "headline_line", "load_profile",
           "plot_reward_designs", "run_reward_designs", "save_figure", "save_metrics", "save_table", "score_evidence",
           "summarize_designs"]
