"""How long ``python -m retry_transport.sim`` takes, as a user runs it::

    python benchmarks/sim_time.py                          # three default runs
    python benchmarks/sim_time.py --against 48c8d66        # and a git ref's, alternately
    python benchmarks/sim_time.py --json benchmarks/sim_time.json
    python benchmarks/sim_time.py -- --no-outage           # after --, the command's options

Each run is the command in a child process started from a temporary directory (``cd /tmp &&
python -m retry_transport.sim``), with the tree's ``src`` first on ``PYTHONPATH``: the
working tree's, or a ref's extracted with ``git archive``. Before the runs the script checks
that the child imports that tree's code and not an installed copy (an install of older code,
which ``cd /tmp`` would import, runs the old simulator: before its jumping loop it took three
times the CPU). Real time is the child's wall-clock time, CPU its user and system time with
its worker processes' (``RUSAGE_CHILDREN``), and ``printed`` the real time the command prints
on its last line. The trees run alternately, so that a slow spell of the machine falls on
both; the load average is shown before and after. The figures are medians of ``--runs``.

docs/simulator.md quotes the record ``--json`` writes (tests/contracts/test_docs_figures.py
holds the page to ``benchmarks/sim_time.json``): measure on a quiet machine, then write it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["-m", "retry_transport.sim"]
#: What the command prints on its last line: ``(4.4 s of real time)``.
PRINTED = re.compile(r"\(([\d.]+) s of real time\)\s*$")


def extract(ref: str, into: Path) -> Path:
    """The ``src`` of git ``ref``, extracted under ``into``."""
    archive = subprocess.run(["git", "archive", ref, "src"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def environment(src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    return env


def check_imports(src: Path, cwd: Path) -> str:
    """Where the child imports the simulator from: it must be ``src``."""
    found = subprocess.run(
        [sys.executable, "-c", "import retry_transport.sim; print(retry_transport.__file__)"],
        cwd=cwd, env=environment(src), check=True, capture_output=True, text=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(src.resolve()):
        sys.exit(f"the command imports {found}, not the code under {src}: an installed copy?")
    return found


def run_once(src: Path, cwd: Path, args: Sequence[str]) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *COMMAND, *args], cwd=cwd, env=environment(src),
                          check=True, capture_output=True, text=True)
    real = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    printed = PRINTED.search(done.stdout)
    return {"real": round(real, 2), "cpu": round(cpu, 2),
            "printed": float(printed.group(1)) if printed else None}


def machine() -> dict[str, Any]:
    model = ""
    try:
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        model = found.group(1).strip() if found else ""
    except OSError:
        pass
    return {"machine": platform.machine(), "cpu": model, "cpus": os.cpu_count(),
            "python": platform.python_version()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].rstrip(":") + ".",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs of each tree (default 3)")
    parser.add_argument("--against", metavar="REF", help="also time a git ref's code")
    parser.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    parser.add_argument("args", nargs="*", help="the command's own options, after --")
    options = parser.parse_args(argv)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        trees = [("working tree", head, ROOT / "src")]
        if options.against:
            trees.append((options.against, options.against,
                          extract(options.against, cwd / "against")))
        for name, _, src in trees:
            print(f"{name}: imports {check_imports(src, cwd)}")
        load = [os.getloadavg()[0]]
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in trees}
        for number in range(1, options.runs + 1):
            for name, _, src in trees:
                run = run_once(src, cwd, options.args)
                runs[name].append(run)
                print(f"  {name} #{number}: {run['real']:.2f} s real, {run['cpu']:.2f} s CPU, "
                      f"printed {run['printed']} s", flush=True)
        load.append(os.getloadavg()[0])
    record = {
        "command": " ".join(["python", *COMMAND, *options.args]),
        **machine(),
        "load": load,
        "trees": [
            {"name": name, "commit": commit, "runs": runs[name],
             "median": {key: statistics.median(run[key] for run in runs[name])
                        for key in ("real", "cpu", "printed")}}
            for name, commit, _ in trees
        ],
    }
    print(f"load average {load[0]:.2f} before, {load[1]:.2f} after; medians:")
    for tree in record["trees"]:
        median = tree["median"]
        print(f"  {tree['name']} ({tree['commit']}): {median['real']:.1f} s real, "
              f"{median['cpu']:.1f} s CPU, printed {median['printed']:.1f} s")
    if options.json:
        Path(options.json).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
