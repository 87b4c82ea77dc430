"""`cag eval` with any blend selection, the experiment-only ones too (experiments/blend_selections.py):

    python experiments/eval_with_selection.py eval --dataset squad ... --blend-select deviation

The product's `cag eval` offers only the query selection; this takes `--blend-select NAME` out of
the arguments, registers the experiment selections and runs `cag` with the rest, the run's config
recording the selection as before.
"""

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import blend_selections  # noqa: E402
import eval.runner as runner  # noqa: E402
from cli.main import app  # noqa: E402


def main() -> None:
    args = sys.argv[1:]
    selection = None
    if "--blend-select" in args:
        at = args.index("--blend-select")
        selection = args[at + 1]
        del args[at:at + 2]
    blend_selections.register()
    if selection:
        run_eval = runner.run_eval
        runner.run_eval = lambda config, progress=None: run_eval(replace(config, blend_select=selection), progress)
    app(args)


if __name__ == "__main__":
    main()
