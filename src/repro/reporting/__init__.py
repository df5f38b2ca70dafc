"""What a reader sees: tables and figures, the paper's reported numbers, significance tests, the claims and the ledger.

- `plots`   tables (csv + md), figures (png + pdf), DVC metrics and plot data
- `paper`   the paper's reported tables and claims (`data/paper/`), as data
- `stats`   paired tests and intervals
- `claims`  each claim judged by fixed rules on the paper's numbers and on a run's paired tests
- `ledger`  the `claims` stage's ledger: both verdicts per claim, its files and its HTML page
"""
