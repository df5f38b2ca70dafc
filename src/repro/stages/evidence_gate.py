"""Stage `evidence_gate`: issue #31's gate: does the reward's F1(o_e) tell answer-bearing evidence from answerless?
(`evidence: null`: not run). Its notebook, `notebooks/evidence_gate.ipynb`, imports this module alone; `python -m
repro.ops.notebooks evidence_gate` runs it, preflight first. What the notebook calls:
"""

from repro.config import load_profile
from repro.io import write_json, write_jsonl
from repro.reporting.plots import save_table
from repro.studies.evidence_gate import gate_verdict, run_gate

__all__ = ["gate_verdict", "load_profile", "run_gate", "save_table", "write_json", "write_jsonl"]
