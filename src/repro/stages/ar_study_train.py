"""Stage `ar_study_train` (§2.2): the rational and vanilla SFT sets from the teacher's kept responses
(`ar_study_teacher`), and their two LoRA runs (repro.studies.ar_study.train).

    python -m repro.stages.ar_study_train --profile P
"""

from repro.config import Profile
from repro.stages import command_line
from repro.studies.ar_study.train import train_variants


def train(cfg: Profile) -> str:
    """Both variants' adapters, one line each."""
    return "\n".join(f"{variant}: {adapter}" for variant, adapter in train_variants(cfg).items())


main = command_line("ar_study_train", __doc__, train)

if __name__ == "__main__":
    main()
