"""Stage `training_dynamics`: Figure 4: answer rewards of o_f, o_r, o_e and response lengths over training steps. Its
notebook, `notebooks/training_dynamics.ipynb`, imports this module alone; `python -m repro.ops.notebooks
training_dynamics` runs it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.data.layout import train_run_dir
from repro.reporting import plots
from repro.studies.training_dynamics import (curve_headline, first_last, plot_training_dynamics,
                                             training_dynamics_data)
from repro.train.grpo import TrainRun, read_log

__all__ = ["TrainRun", "curve_headline", "first_last", "load_profile", "plot_training_dynamics", "plots", "read_log",
           "train_run_dir", "training_dynamics_data"]
