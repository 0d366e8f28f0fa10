"""A throwaway benchmark with a search section: a run script with a known objective.

The script's validation metric ``val`` climbs to ``-(x - 0.3)**2`` over ``steps`` steps (its
maximum, 0, is at x = 0.3), and the test metric ``test`` is ``val + 0.001``. With ``child=1`` it
leaves a child process in its group (its pid in ``child.pid``), which pruning must kill.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

SEARCH_SCRIPT = '''
import os, subprocess, sys, time
from benchlab import log, summary
args = dict(a.split("=", 1) for a in sys.argv[1:])
x = float(args["x"])
steps = int(args.get("steps", 5))
nap = float(args.get("nap", 0))
run_dir = os.environ["BENCHLAB_RUN_DIR"]
if args.get("child"):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    with open(os.path.join(run_dir, "child.pid"), "w") as f:
        f.write(str(child.pid))
final = -(x - 0.3) ** 2
for s in range(steps):
    val = final - (steps - 1 - s) / steps
    log(step=s, val=val, test=val + 0.001)
    time.sleep(nap)
summary(val=final, test=final + 0.001)
'''

SEARCH_SPEC = """
name: tune
tasks: [{name: t}]
configs:
  - name: base
    params: {x: 0.0, steps: 5, nap: 0, child: ""}
  - name: other
    params: {x: -0.5, steps: 5, nap: 0, child: ""}
seeds: 2
command: python run.py x={x} steps={steps} nap={nap} child={child}
metrics:
  primary: {name: test, goal: max}
  secondary: [val]
baseline: other
search:
  metric: val
  base_config: base
  space:
    x: {uniform: [-1, 1]}
  seeds: [7]
  budget: %(budget)s
  pruner: %(pruner)s
"""


def write_search_bench(root: Path, budget: int = 6, pruner: str = "none", spec: str | None = None,
                       params: str | None = None) -> Path:
    """The spec file (``bench.yaml``) and ``run.py`` in ``root``; ``params`` replaces the base config's."""
    (root / "run.py").write_text(SEARCH_SCRIPT)
    text = textwrap.dedent(spec if spec is not None else SEARCH_SPEC % {"budget": budget, "pruner": pruner}).lstrip()
    if params is not None:
        text = text.replace('{x: 0.0, steps: 5, nap: 0, child: ""}', params, 1)
    path = root / "bench.yaml"
    path.write_text(text)
    return path


def objective(x: float) -> float:
    """The known function the script's final ``val`` is (computed here, not read from the script)."""
    return -((x - 0.3) ** 2)
