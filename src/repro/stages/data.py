"""Stage `data`: corpus, QA sets, indexes, top-k retrieval and noisy contexts (App. A.3, Figure 5); see
repro.data.layout. Its notebook, `notebooks/00_data.ipynb`, imports this module alone; `python -m repro.ops.notebooks
data` runs it, preflight first. What the notebook calls:
"""

from repro.assets import resolve
from repro.config import load_profile
from repro.data import fanoutqa, layout
from repro.reporting.plots import save_table
from repro.retrieval import prepare as data_stage

__all__ = ["data_stage", "fanoutqa", "layout", "load_profile", "resolve", "save_table"]
