"""Stage `released_extractor`: `models.released_extractor` resolved, checked against Table 2 and fingerprinted: the
extractor of `eviomni: released_extractor` (D132, D179; repro.studies.released).

    python -m repro.stages.released_extractor --profile P
"""

from repro.assets import AssetError
from repro.config import ConfigError
from repro.stages import command_line
from repro.studies.released import ReleasedCheckError, record_released_extractor

main = command_line("released_extractor", __doc__, record_released_extractor,
                    (AssetError, ConfigError, ReleasedCheckError))

if __name__ == "__main__":
    main()
