"""The paper's formulas, each a function named after its term, importing no deep-learning framework
(import-linter's `pure-formulas` contract):

- `prompts`  Appendix E's prompts and their assembly (and the neighbours': Eval-RAR A.1, ARENA Tables 1 and 8)
- `tags`     `<reason>/<extract>/<answer>` parsing, the strict or lenient format check (D147)
- `masking`  Eq. 4's three contexts of a rollout (o_f, o_r, o_e)
- `rewards`  Eqs. 5, 7, 10, 11 and the score function of every reward design (`repro.registry.REWARD_DESIGNS`)
- `metrics`  EM, F1, answer recall (AR) and compression ratio (CR)
"""
