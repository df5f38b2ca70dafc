"""Data layer: QA sets in FlashRAG's jsonl format, the passage corpus, splits and noise injection.

- `qa`        FlashRAG rows `{"id","question","golden_answers","metadata"}`: validation, reading, writing
- `loaders`   NQ / TriviaQA / HotpotQA / 2WikiMultihopQA / MuSiQue from local files or the FlashRAG hub repo
- `corpus`    Search-R1/FlashRAG passages `{"id","contents":"\\"Title\\"\\ntext"}`, word chunking, random access
- `fanoutqa`  the embedded sets built from FanOutQA + the offline Wikipedia extracts
- `splits`    deterministic train/dev/test assignment by hashing ids; seeded question subsets
- `noise`     irrelevant-passage injection for the robustness study (Figure 5)
- `answers`   "passage contains a golden answer" (on SQuAD-normalised text), for a passage and a contexts row
- `layout`    where every stage writes, per profile
"""
