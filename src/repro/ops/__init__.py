"""Operations: fetching the paper profiles' assets, checking a machine, estimating and launching a run. A sibling of the
method, not a layer under it: nothing here imports `repro.train`, `repro.evaluation`, `repro.baselines`, `repro.agentic`
or `repro.studies`, and none of them imports this package (import-linter's `operations-apart` contracts).

- `remote`         the paper profiles' external assets: plan, lock (`fetch.lock.yaml`), fetch, verify, convert
- `preflight`      one-line checks before an expensive stage, keyed by the stage's name (`repro.registry.STAGES`)
- `costs`          the ESTIMATED cost of a profile, stage by stage (`python -m repro.ops.costs --markdown`)
- `pipeline_deps`  each stage's code dependencies in dvc.yaml, from the import graph
- `notebooks`      the papermill runner behind every notebook stage
- `lab`            `make lab`'s contents manager
- `rehearsal`      `paper-1p5b`'s stage graph on a CPU, from a local hub mirror

The embedded assets (`repro.assets`) are not here: every model load resolves its reference through them, so they sit
at the bottom with the config.
"""
