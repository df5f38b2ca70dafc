"""The `released_extractor` stage: the authors' EviOmni checkpoint (models.released_extractor), checked and
fingerprinted, so that the evaluation stages can depend on it in place of a GRPO run (D132).

    python -m repro.evaluation.released --profile paper-1p5b

writes data/<profile>/released_extractor/extractor.json: the reference and the fingerprint
(repro.io.model_fingerprint) of the local directory it resolves to (an embedded asset, a repo that
`python -m repro.remote fetch` downloaded at its pinned revision, or a local path). The record names no path, so it
is the same on every machine holding the same weights; a profile that names no released checkpoint records
`{"reference": null}`. With `eviomni: released_extractor` at the top of params.yaml, dvc.yaml makes Tables 2, 4, 9-10
and Figure 5 depend on this directory instead of data/<profile>/train/eviomni, and the studies evaluate the
checkpoint as method `eviomni_released` (repro.config.with_released_eviomni): `dvc repro main_comparison` then never
runs train_eviomni.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from repro.assets import AssetError, is_hub_id, resolve
from repro.config import Profile, load_profile
from repro.data.layout import profile_dir
from repro.io import model_fingerprint, write_json

RECORD = "extractor.json"


def released_dir(profile: str) -> Path:
    return profile_dir(profile) / "released_extractor"


def checkpoint_record(cfg: Profile) -> dict:
    """What the stage records for models.released_extractor; an AssetError naming the key when the checkpoint is not
    a local directory holding a config.json and safetensors weights."""
    ref = cfg.models.released_extractor
    if ref is None:
        return {"reference": None}
    key = f"params.yaml: profiles.{cfg.name}.models.released_extractor"
    path = Path(resolve(ref, cfg.name))
    if not path.is_dir():
        hint = (f"run `HF_HUB_OFFLINE=0 python -m repro.remote fetch --profile {cfg.name}` (it downloads the repo at "
                f"its pinned revision)" if is_hub_id(ref) else "give a checkpoint directory")
        raise AssetError(f"{key}: '{ref}' is not a directory on this machine; {hint}")
    missing = [name for name, present in (("config.json", (path / "config.json").is_file()),
                                          ("*.safetensors", any(path.glob("*.safetensors")))) if not present]
    if missing:
        raise AssetError(f"{key}: {path} has no {' and no '.join(missing)} (a causal LM saved with safetensors)")
    return {"reference": ref, "fingerprint": model_fingerprint(str(path))}


def record_released_extractor(cfg: Profile) -> Path:
    """Write the stage's record (atomically) and return its path."""
    path = released_dir(cfg.name) / RECORD
    write_json(path, checkpoint_record(cfg))
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", help="profile from params.yaml (default: its `profile` key)")
    args = parser.parse_args(argv)
    try:
        print(record_released_extractor(load_profile(args.profile)))
    except AssetError as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main()
