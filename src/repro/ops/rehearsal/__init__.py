"""The rehearsal of the paper profiles on a CPU (issue #30, deliverable 4).

- `mirror`  a local hub MIRROR of every repo the paper profiles name: seeded tiny random models written in each real
            repo's architecture and file layout, FlashRAG's split files, wiki-18 and Search-R1's e5 index over it;
            built from `content` (passages, questions, FlashRAG's rows), `tokenizers`, `weights` and `repos` (each
            repo's files), with `files` (bytes, digests, seeds, commits, READMEs) and `templates` (chat templates)

- `run`     paper-1p5b's stage graph on this CPU from the mirror: fetch (twice), preflight, `dvc repro`, `dvc status`,
            in a scratch copy of the repository, profile `rehearsal`

    python -m repro.ops.rehearsal mirror DIR [--seed N]
    python -m repro.ops.rehearsal run [--workdir DIR] [--keep]
"""
