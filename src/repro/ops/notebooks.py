"""Run a parametrised notebook with papermill: the command behind every notebook stage of dvc.yaml.

    python -m repro.ops.notebooks STAGE [--profile P] [-p key value ...]

runs the stage's preflight (`repro.ops.preflight.require`), then executes its notebook, `notebooks/NAME.ipynb` (NAME:
the `notebook` of the stage's row in repro.registry.STAGES), from the repository root with the parameters `profile`
and `out_dir` (plus any `-p` overrides) injected after its `parameters` cell, and writes the executed copy to
`results/<profile>/NAME/NAME.ipynb`. Tables and figures the notebook writes go to the same `out_dir`.
The executed copy is written atomically, so a failed run leaves no half-finished notebook behind.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import yaml

from repro.config import PARAMS_FILE, load_profile, read_params
from repro.data.layout import results_dir
from repro.io import atomic_path
from repro.registry import STAGES

NOTEBOOKS_DIR = Path("notebooks")


def run_notebook(name: str, profile: str | None = None, parameters: dict | None = None, progress: bool = True) -> Path:
    """Execute notebooks/<name>.ipynb for `profile` (default: the selected one); return the executed copy."""
    import papermill

    source = NOTEBOOKS_DIR / f"{name}.ipynb"
    if not source.exists():
        raise FileNotFoundError(f"{source}: no such notebook (run from the repository root)")
    profile = profile or read_params(PARAMS_FILE)["profile"]
    out_dir = results_dir(profile, name)
    out_dir.mkdir(parents=True, exist_ok=True)
    params = {"profile": profile, "out_dir": str(out_dir), **(parameters or {})}
    # Every progress-bar refresh becomes an output line of the executed notebook: refresh rarely.
    os.environ.setdefault("TQDM_MININTERVAL", "15")
    executed = out_dir / f"{name}.ipynb"
    with atomic_path(executed) as tmp:
        papermill.execute_notebook(
            str(source), str(tmp), parameters=params, cwd=os.getcwd(), progress_bar=progress, kernel_name="python3"
        )
    return executed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=[s.name for s in STAGES.values() if s.notebook], metavar="STAGE",
                        help="a notebook stage of dvc.yaml, e.g. data (notebooks/00_data.ipynb)")
    parser.add_argument("--profile", help=f"profile from {PARAMS_FILE} (default: its `profile` key)")
    parser.add_argument("-p", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                        help="extra notebook parameter; VALUE is parsed as YAML")
    args = parser.parse_args(argv)
    extra = {key: yaml.safe_load(value) for key, value in args.p}
    from repro.ops.preflight import PreflightError, require

    try:  # assets, GPUs and context lengths before the stage starts (D119)
        require(load_profile(args.profile), args.stage)
    except PreflightError as err:
        raise SystemExit(f"error: {err}") from None
    print(run_notebook(STAGES[args.stage].notebook, args.profile, extra))


if __name__ == "__main__":
    main()
