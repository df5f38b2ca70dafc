"""Stage `length_tuning` (optional, App. A.2, #21): τ and γ on a dev grid, a GRPO run per pair; `length_tuning: null`
records "not requested" and loads nothing (D150; repro.studies.length_tuning).

    python -m repro.stages.length_tuning --profile P
"""

from repro.stages import command_line
from repro.studies.length_tuning import tune_length_rewards

main = command_line("length_tuning", __doc__, tune_length_rewards)

if __name__ == "__main__":
    main()
