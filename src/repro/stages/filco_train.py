"""Stage `filco_train`: FilCo (Wang et al. 2023): StrInc/lexical silver contexts, then LoRA SFT of the context filter;
resumable.

    python -m repro.stages.filco_train --profile P
"""

from repro.baselines.filco import train_filco
from repro.stages import command_line

main = command_line("filco_train", __doc__, train_filco)

if __name__ == "__main__":
    main()
