"""Stage `retrieval_quality`: Table 8: Recall@5 / NDCG@5 of the top-5 passages. Its notebook,
`notebooks/01_retrieval_quality.ipynb`, imports this module alone; `python -m repro.ops.notebooks retrieval_quality`
runs it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.reporting.paper import PAPER_DIR, TABLE_FILES, load_paper_tables
from repro.reporting.plots import headline, headline_line, save_figure, save_metrics, save_table
from repro.retrieval.quality import quality_table

__all__ = ["PAPER_DIR", "TABLE_FILES", "headline", "headline_line", "load_paper_tables", "load_profile",
           "quality_table", "save_figure", "save_metrics", "save_table"]
