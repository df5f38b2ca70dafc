"""Stage `latency`: Table 4: seconds per query of evidence extraction, model load excluded. Its notebook,
`notebooks/latency.ipynb`, imports this module alone; `python -m repro.ops.notebooks latency` runs it, preflight
first. What the notebook calls:
"""

from repro.config import load_profile
from repro.evaluation.tables import reference_label
from repro.reporting.paper import load_paper_tables
from repro.reporting.plots import headline, headline_line, save_figure, save_metrics, save_table
from repro.studies.figures import plot_latency
from repro.studies.latency import run_latency, table4

__all__ = ["headline", "headline_line", "load_paper_tables", "load_profile", "plot_latency", "reference_label",
           "run_latency", "save_figure", "save_metrics", "save_table", "table4"]
