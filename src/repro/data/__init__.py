"""Data layer: QA sets in FlashRAG's jsonl format, the passage corpus, splits and noise injection.

- `qa`        FlashRAG rows `{"id","question","golden_answers","metadata"}`: validation, reading, writing
- `loaders`   NQ / TriviaQA / HotpotQA / 2WikiMultihopQA / MuSiQue from local files or the FlashRAG hub repo
- `corpus`    Search-R1/FlashRAG passages `{"id","contents":"\\"Title\\"\\ntext"}`, word chunking, random access
- `fanoutqa`  the embedded sets built from FanOutQA + the offline Wikipedia extracts
- `splits`    deterministic train/dev/test assignment by hashing ids
- `noise`     irrelevant-passage injection for the robustness study (Figure 5)
- `answers`   SQuAD answer normalisation and "passage contains a golden answer"
"""
