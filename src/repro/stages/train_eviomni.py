"""Stage `train_eviomni`: §3: GRPO of the extractor; resumable (checkpoints persist), the dev-selected one exported. Its
notebook, `notebooks/train_eviomni.ipynb`, imports this module alone; `python -m repro.ops.notebooks train_eviomni`
runs it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.data.layout import warmup_dir
from repro.io import read_jsonl
from repro.reporting import plots
from repro.studies.heldout import compare_policies, heldout_rows, score_policy
from repro.studies.recall_check import warmup_recall_check
from repro.studies.training_dynamics import curve_headline, first_last
from repro.train.grpo import read_log, train_extractor
from repro.train.grpo.warmup import starting_policy

__all__ = ["compare_policies", "curve_headline", "first_last", "heldout_rows", "load_profile", "plots", "read_jsonl",
           "read_log", "score_policy", "starting_policy", "train_extractor", "warmup_dir", "warmup_recall_check"]
