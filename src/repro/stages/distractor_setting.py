"""Stage `distractor_setting`: Tables 9-10 (App. D): the Table 2 methods on gold + distractor paragraphs. Its notebook,
`notebooks/distractor_setting.ipynb`, imports this module alone; `python -m repro.ops.notebooks distractor_setting`
runs it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.evaluation.tables import compare_methods, reference_label, reference_pairs, summarize_files, table2
from repro.reporting.paper import load_paper_tables
from repro.reporting.plots import headline, headline_line, save_figure, save_metrics, save_table
from repro.studies.comparison import run_distractor_setting
from repro.studies.figures import plot_main_comparison

__all__ = ["compare_methods", "headline", "headline_line", "load_paper_tables", "load_profile", "plot_main_comparison",
           "reference_label", "reference_pairs", "run_distractor_setting", "save_figure", "save_metrics", "save_table",
           "summarize_files", "table2"]
