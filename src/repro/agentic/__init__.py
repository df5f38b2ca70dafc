"""Agentic RAG with the evidence extractor (§4.7-4.8, Algorithm 2, Tables 5-6 and 15-18), and Eval-RAR's prompt
(seed 003) as a third condition of the same agents.

- `actions`     Search-R1's text protocol: cutting and parsing a turn, `<information>` blocks, the
                invalid-action message, the scored answer; the protocols (Search-R1's, Eval-RAR's) and the
                `<evaluate>` blocks
- `search`      the agent's search tool: in process (`LocalSearch`) or a Search-R1 server (`RetrievalClient`)
- `server`      a Search-R1-compatible `POST /retrieve` server on 127.0.0.1 (`python -m repro.agentic.server`)
- `extractor`   the context-aware query q ⊕ y_t ⊕ q_s and the extractor call that replaces retrieved text
- `loop`        the agent loop, batched across items, with or without the extractor, with Eval-RAR's evaluation step
- `trajectory`  per-item trajectories, their records, EM, number of searches, compression and evaluations
- `study`       the study of one profile: sampled items, runs per condition, Tables 5 and 6, paired tests
- `cases`       the case viewer: a trajectory without and with the extractor side by side
"""
