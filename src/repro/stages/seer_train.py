"""Stage `seer_train`: SEER (Zhao et al. 2024a): sampled candidates, three-expert assessment, DPO of a LoRA extractor;
resumable.

    python -m repro.stages.seer_train --profile P
"""

from repro.baselines.seer import train_seer
from repro.stages import command_line

main = command_line("seer_train", __doc__, train_seer)

if __name__ == "__main__":
    main()
