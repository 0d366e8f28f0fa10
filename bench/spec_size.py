"""Reading a large spec: benchlab's one-pass reader against PyYAML on the same file.

Generated specs of N hand-listed configs (one task, one seed; each config a name and
three params, about 70 bytes). For each size the script times, in this process:

- anchor: PyYAML as benchlab read specs before — the text composed for line numbers
  and loaded again, both in pure Python (``yaml.compose`` + ``yaml.load`` with a
  ``SafeLoader``); and, as a second anchor, one ``yaml.load`` with libyaml's
  ``CSafeLoader``, the fastest plain PyYAML load;
- benchlab: ``benchlab.spec.load_spec`` — reading, variables, schema and every check —
  and ``benchlab validate`` as a command (a subprocess, plan printed), end to end.

It then writes a 50 MB spec and times ``benchlab validate`` refusing it at the size limit.

    python bench/spec_size.py [--configs 10000 100000] [--repeat 1] [--no-anchor]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_spec(path: Path, configs: int) -> int:
    lines = ["name: big", "tasks:", "  - name: t1", "seeds: 1",
             "command: python run.py --lr {lr} --hidden {hidden} --opt {opt} --seed {seed}",
             "metrics: {primary: score}", "configs:"]
    for i in range(configs):
        lines.append(f"  - name: c{i:07d}\n    params: {{lr: 0.{i:06d}, hidden: {i % 512}, opt: adam}}")
    path.write_text("\n".join(lines) + "\n")
    return path.stat().st_size


def best_of(repeat: int, fn) -> float:
    """Best wall time of ``repeat`` calls."""
    return min(timed(fn)[0] for _ in range(repeat))


def timed(fn) -> tuple[float, float]:
    """Wall and CPU seconds of one call (CPU time is what a busy machine distorts least)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def anchor_pure(text: str) -> None:
    import yaml

    yaml.compose(text, Loader=yaml.SafeLoader)
    yaml.load(text, Loader=yaml.SafeLoader)  # noqa: S506 - the safe loader


def anchor_c(text: str) -> None:
    import yaml

    yaml.load(text, Loader=yaml.CSafeLoader)  # noqa: S506 - the safe loader


def validate_command(path: Path) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "benchlab", "validate", str(path)], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "120"})
    return time.perf_counter() - start, proc.returncode, proc.stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-anchor", action="store_true", help="time benchlab only")
    args = parser.parse_args()

    from benchlab.spec import load_spec
    from benchlab.spec.yaml_reader import MAX_BYTES

    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'configs':>8} {'MB':>6} {'pure PyYAML x2':>15} {'CSafeLoader':>12} {'load_spec':>10} "
              f"{'(CPU)':>7} {'ratio':>7} {'validate cmd':>13}")
        for n in args.configs:
            path = Path(tmp) / f"spec_{n}.yaml"
            size = write_spec(path, n)
            text = path.read_text()
            pure = c_load = float("nan")
            if not args.no_anchor:
                pure = best_of(args.repeat, lambda text=text: anchor_pure(text))
                c_load = best_of(args.repeat, lambda text=text: anchor_c(text))
            ours, cpu = min(timed(lambda path=path: load_spec(path)) for _ in range(args.repeat))
            wall, code, _ = validate_command(path)
            print(f"{n:>8,} {size / 2**20:>6.1f} {pure:>14.2f}s {c_load:>11.2f}s {ours:>9.2f}s {cpu:>6.2f}s "
                  f"{pure / ours:>6.1f}x {wall:>11.2f}s{'' if code == 0 else f' (exit {code})'}")

        big = Path(tmp) / "spec_50mb.yaml"
        with big.open("w") as f:
            f.write("name: big\ntasks: [{name: t1}]\nconfigs: [{name: a}]\ncommand: run\n"
                    "metrics: {primary: score}\ndescription: '")
            chunk = "x" * 2**20
            for _ in range(50):
                f.write(chunk)
            f.write("'\n")
        wall, code, message = validate_command(big)
        print(f"\n50 MB spec (limit {MAX_BYTES // 2**20} MB): benchlab validate exits {code} in {wall:.2f} s: "
              f"{message}")


if __name__ == "__main__":
    main()
