"""Stage `length_rewards`: Figure 7 (both panels) over the τ and γ grids of App. A.2. Its notebook,
`notebooks/length_rewards.ipynb`, imports this module alone; `python -m repro.ops.notebooks length_rewards` runs it,
preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.formulas import rewards
from repro.reporting import plots

__all__ = ["load_profile", "plots", "rewards"]
