"""Stage `main_comparison`: Table 2: every method's evidence answered by the QA generator; per-item files persist. Its
notebook, `notebooks/main_comparison.ipynb`, imports this module alone; `python -m repro.ops.notebooks
main_comparison` runs it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.data.layout import qa_generator_dir
from repro.evaluation.tables import (compare_methods, questions_needed, reference_label, reference_pairs,
                                     summarize_files, table2)
from repro.io import read_jsonl
from repro.reporting.paper import load_paper_tables
from repro.reporting.plots import headline, headline_line, save_figure, save_metrics, save_table
from repro.studies.comparison import run_main_comparison, run_reading_check
from repro.studies.figures import plot_main_comparison, plot_reading_check

__all__ = ["compare_methods", "headline", "headline_line", "load_paper_tables", "load_profile", "plot_main_comparison",
           "plot_reading_check", "qa_generator_dir", "questions_needed", "read_jsonl", "reference_label",
           "reference_pairs", "run_main_comparison", "run_reading_check", "save_figure", "save_metrics", "save_table",
           "summarize_files", "table2"]
