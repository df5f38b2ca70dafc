"""Stage `ar_study`: Table 1 and Figure 2 (§2.2): AR of vanilla/rational evidence and the rationale; per-item records
persist. Its notebook, `notebooks/ar_study.ipynb`, imports this module alone; `python -m repro.ops.notebooks
ar_study` runs it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.io import read_jsonl
from repro.reporting.paper import load_paper_tables
from repro.reporting.plots import headline, headline_line, save_figure, save_metrics, save_table
from repro.studies.ar_study.figures import plot_overlap
from repro.studies.ar_study.paths import VARIANTS, run_dir, teacher_path
from repro.studies.ar_study.recall import run_recall
from repro.studies.ar_study.tables import ar_summary, discordant_cases, mcnemar_table, overlap_table, table1
from repro.studies.ar_study.teacher import kept_records, verdict_counts

__all__ = ["VARIANTS", "ar_summary", "discordant_cases", "headline", "headline_line", "kept_records",
           "load_paper_tables", "load_profile", "mcnemar_table", "overlap_table", "plot_overlap", "read_jsonl",
           "run_dir", "run_recall", "save_figure", "save_metrics", "save_table", "table1", "teacher_path",
           "verdict_counts"]
