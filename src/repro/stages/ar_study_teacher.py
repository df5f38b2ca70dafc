"""Stage `ar_study_teacher` (§2.2): Table 14 responses of the teacher (DeepSeek-R1 over its API on the paper
profiles: no GPU), judged and filtered to the correct ones; resumable (repro.studies.ar_study.teacher). Apart from
`ar_study_train` so that it can run on a machine without GPUs (docs/gpu.md).

    python -m repro.stages.ar_study_teacher --profile P
"""

from repro.stages import command_line
from repro.studies.ar_study.train import run_teacher

main = command_line("ar_study_teacher", __doc__, run_teacher)

if __name__ == "__main__":
    main()
