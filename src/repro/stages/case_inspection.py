"""Stage `case_inspection`: Figure 8 ("3I"): passages, each method's evidence, rationale and answer side by side. Its
notebook, `notebooks/case_inspection.ipynb`, imports this module alone; `python -m repro.ops.notebooks
case_inspection` runs it, preflight first. What the notebook calls:
"""

from repro.config import RELEASED_EVIOMNI, load_profile
from repro.data.layout import predictions_path
from repro.io import write_text
from repro.registry import METHODS
from repro.reporting.plots import save_table
from repro.studies.cases import cases_html, evidence_recall, find_cases, load_cases
from repro.studies.comparison import MAIN_COMPARISON, evaluation_rows

__all__ = ["MAIN_COMPARISON", "METHODS", "RELEASED_EVIOMNI", "cases_html", "evaluation_rows", "evidence_recall",
           "find_cases", "load_cases", "load_profile", "predictions_path", "save_table", "write_text"]
