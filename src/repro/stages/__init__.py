"""One module per dvc.yaml stage, named after it (`repro.registry.STAGES` has its row): the only `repro` module its
notebook or its command line imports. A notebook stage's module names what its notebook calls; a command-line
stage's module is its command, `python -m repro.stages.<stage> --profile P`, the preflight first (`command_line`).
Nothing below this package imports it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def command_line(stage: str, doc: str | None, run: Callable, errors: tuple[type[Exception], ...] = ()
                 ) -> Callable[[list[str] | None], None]:
    """The `main` of a command-line stage: `--profile`, the stage's preflight (`repro.ops.preflight.require`, keyed by
    its name), then `run(cfg)`, whose result is printed; a preflight failure or one of `errors` ends it with one line
    per problem and no traceback."""

    def main(argv: list[str] | None = None) -> None:
        from repro.config import load_profile
        from repro.ops.preflight import PreflightError, require

        parser = argparse.ArgumentParser(prog=f"python -m repro.stages.{stage}", description=doc,
                                         formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
        args = parser.parse_args(argv)
        cfg = load_profile(args.profile)
        try:
            require(cfg, stage)
            print(run(cfg))
        except (PreflightError, *errors) as err:
            raise SystemExit(f"error: {err}") from None

    return main
