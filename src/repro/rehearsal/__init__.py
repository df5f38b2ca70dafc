"""The rehearsal of the paper profiles on a CPU (issue #30, deliverable 4).

- `mirror`  a local hub MIRROR of every repo the paper profiles name: seeded tiny random models written in each real
            repo's architecture and file layout, FlashRAG's split files, wiki-18 and Search-R1's e5 index over it

- `run`     paper-1p5b's stage graph on this CPU from the mirror: fetch (twice), preflight, `dvc repro`, `dvc status`,
            in a scratch copy of the repository, profile `rehearsal`

    python -m repro.rehearsal mirror DIR [--seed N]
    python -m repro.rehearsal run [--workdir DIR] [--keep]
"""
