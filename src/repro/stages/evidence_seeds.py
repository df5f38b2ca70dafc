"""Stage `evidence_seeds`: issue #31's step 2, if the gate passed: GRPO seeds of one recipe against the start
(`evidence: null`: not run), issue #49's free checks on its items and, for a control profile, step 3's placebo. Its
notebook, `notebooks/evidence_seeds.ipynb`, imports this module alone; `python -m repro.ops.notebooks evidence_seeds`
runs it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.io import write_json, write_jsonl
from repro.reporting import plots
from repro.studies import evidence_placebo as ep
from repro.studies import evidence_seeds as es
from repro.studies import evidence_shortcut as esc
from repro.studies.training_dynamics import plot_training_dynamics
from repro.train.grpo.logs import read_log

__all__ = ["ep", "es", "esc", "load_profile", "plot_training_dynamics", "plots", "read_log", "write_json",
           "write_jsonl"]
