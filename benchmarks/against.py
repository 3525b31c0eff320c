"""The package as it was at a git ref, importable beside the working tree's, for side-by-side
benchmarks in one process.

``load(ref)`` extracts ``src/retry_transport`` of ``ref`` (``git archive``) into a temporary
folder under another package name (``retry_transport_<sha>``) and imports it: the package's
own modules import each other relatively, so the copy is self-contained. Run from the
repository root::

    python benchmarks/against.py HEAD~3        # success path: bare, REF, working tree
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def load(ref: str) -> ModuleType:
    """``retry_transport`` as of ``ref``, imported as ``retry_transport_<short sha>``."""
    sha = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    name = f"retry_transport_{sha}"
    if name in sys.modules:
        return sys.modules[name]
    archive = subprocess.run(["git", "archive", "--format=tar", ref, "src/retry_transport"],
                             cwd=ROOT, check=True, capture_output=True).stdout
    folder = Path(tempfile.mkdtemp(prefix="rt-against-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    (folder / "src" / "retry_transport").rename(folder / name)
    sys.path.insert(0, str(folder))
    return importlib.import_module(name)


def per_call(run: Callable[[int], None], n: int) -> float:
    """Seconds per call of ``run(n)``, the collector off while it runs."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        run(n)
        return (time.perf_counter() - start) / n
    finally:
        gc.enable()


def compare(arms: dict[str, Callable[[int], None]], *, rounds: int, n: int,
            base: str) -> dict[str, list[float]]:
    """Per round, every arm runs ``n`` calls (the order rotating); returns, per arm, the
    overhead over ``base`` in each round, in seconds per call."""
    names = list(arms)
    overheads: dict[str, list[float]] = {name: [] for name in names if name != base}
    for index in range(rounds):
        order = names[index % len(names):] + names[:index % len(names)]
        times = {name: per_call(arms[name], n) for name in order}
        for name in overheads:
            overheads[name].append(times[name] - times[base])
    return overheads


def _success_arms(modules: dict[str, Any], **options: Any) -> dict[str, Callable[[int], None]]:
    import httpx

    request = httpx.Request("GET", "https://api.example.com/items")

    def ok(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200)

    bare = httpx.MockTransport(ok)

    def loop(handle: Callable[[httpx.Request], Any]) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                handle(request)
        return run

    arms = {"bare": loop(bare.handle_request)}
    for label, module in modules.items():
        made = {key: value(module) if callable(value) else value
                for key, value in options.items()}
        transport = module.RetryTransport(httpx.MockTransport(ok), **made)
        arms[label] = loop(transport.handle_request)
    return arms


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ref", help="the git ref to compare the working tree against")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--n", type=int, default=2000, help="requests per arm and round")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    import retry_transport

    old = load(args.ref)
    modules = {args.ref: old, "working tree": retry_transport}
    settings: dict[str, dict[str, Any]] = {
        "defaults": {},
        "with CircuitBreaker()": {"breaker": lambda m: m.CircuitBreaker()},
        "budget=None, cooldown=False": {"budget": None, "cooldown": False},
    }
    for title, options in settings.items():
        result = compare(_success_arms(modules, **options), rounds=args.rounds, n=args.n,
                         base="bare")
        old_us = statistics.median(result[args.ref]) * 1e6
        new_us = statistics.median(result["working tree"]) * 1e6
        ratios = [new / o for new, o in zip(result["working tree"], result[args.ref],
                                           strict=True) if o > 0]
        print(f"success, {title}: {args.ref} +{old_us:.2f} us, working tree +{new_us:.2f} us"
              f" over bare; new/old median {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
