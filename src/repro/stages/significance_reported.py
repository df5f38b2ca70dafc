"""Stage `significance_reported`: tests that are valid on the paper's reported means (data/paper). Its notebook,
`notebooks/significance_reported.ipynb`, imports this module alone; `python -m repro.ops.notebooks
significance_reported` runs it, preflight first. What the notebook calls:
"""

from repro.reporting import paper, plots, stats
from repro.reporting.claims import reported_verdicts

__all__ = ["paper", "plots", "reported_verdicts", "stats"]
