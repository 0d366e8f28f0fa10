"""First launch before and after a change: two source trees of benchlab, measured in turn.

    git archive <commit> src | tar -x -C /tmp/before
    python bench/startup_ab.py /tmp/before/src src [--runs 100000] [--repeat 2]

For each repeat, each tree in turn runs a fresh sweep of ``--runs`` trivial runs
(``bench/scale.py``'s spec and measurement) stopped 2 s after its first launch, then a
resume stopped 1 s after its own: the seconds from the command's start to each first
launch, wall and CPU. Alternating the two trees in one run of the script puts them
under the same load; on a shared machine, read the CPU figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="the src/ folder of the code before")
    parser.add_argument("after", help="the src/ folder of the code after")
    parser.add_argument("--runs", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="benchlab-startup-"))
    spec = scale.write_spec(root, args.runs)
    print(f"# {args.runs:,} runs, -j {args.jobs}; load average {scale._load()} at the start")
    for _ in range(args.repeat):
        for name, src in (("before", args.before), ("after", args.after)):
            os.environ["PYTHONPATH"] = str(Path(src).resolve())
            results = root / name
            shutil.rmtree(results, ignore_errors=True)
            first = scale.sweep(spec, results, args.jobs, 2.0)
            resume = scale.sweep(spec, results, args.jobs, 1.0)
            print(f"{name:6s}  first launch {scale.launch(first)}  resume {scale.launch(resume)}  "
                  f"peak {max(first['rss_mib'], resume['rss_mib']):.0f} MiB", flush=True)
    print(f"# load average {scale._load()} at the end")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
