"""Stage `claims`: the ledger (issue #33): every claim of the paper with its verdicts on the reported tables and on this
run. Its notebook, `notebooks/claims.ipynb`, imports this module alone; `python -m repro.ops.notebooks claims` runs
it, preflight first. What the notebook calls:
"""

from repro.reporting import paper, plots
from repro.reporting.ledger import ledger, our_comparisons, verdict_counts, write_ledger

__all__ = ["ledger", "our_comparisons", "paper", "plots", "verdict_counts", "write_ledger"]
