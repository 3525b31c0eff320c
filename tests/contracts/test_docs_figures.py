"""The figures README.md and docs/ quote from the simulator are the ones it gives today.

A page that quotes ``python -m retry_transport.sim`` says so next to the figure, and this
module holds it to the command's output:

- every ```text block of README.md and docs/ is a piece of that output: each of its lines is
  the beginning of a line the command prints (the README's table leaves out the last column);
- every figure in the prose is listed in :data:`FIGURES`: the sentence the page says, with
  each figure a ``{}`` that the command's output fills in.

The command runs once, with its defaults, for the whole module (over every core, about 20 s
on two; its results do not depend on how many workers it has). tests/tools/test_sim.py runs the
same scenarios in module fixtures of its own, which pytest does not share across modules.
A figure from the simulator's Python API, named on the page beside it, is in
:data:`API_FIGURES`, computed by the call the page names. The ``python`` examples of
docs/simulator.md assert their own figures as they run (tests/contracts/test_docs_examples.py).
Measured figures are held to the one command they come from where a record of it can be: the
performance page's instruction counts in its prose to its table (one run), and the simulator
page's time to the runs ``python benchmarks/sim_time.py --json`` recorded
(benchmarks/sim_time.json); other timings' pages name the script and the machine.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import pytest

from retry_transport import CircuitBreaker
from retry_transport.sim import run_outage
from retry_transport.sim.__main__ import main
from tests.contracts.test_docs_examples import DOCUMENTS, ROOT, Block, _blocks


def _flat(text: str) -> str:
    """``text`` with every run of whitespace, line ends included, as one space."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Output:
    """What ``python -m retry_transport.sim`` printed, and ways to read its figures."""

    text: str

    @cached_property
    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.text.splitlines()]

    @cached_property
    def flat(self) -> str:
        return _flat(self.text)

    def find(self, pattern: str, group: int = 1) -> str:
        """A group of the first match of ``pattern`` in the output, its lines joined."""
        match = re.search(pattern, self.flat)
        assert match is not None, f"the command's output has nothing like {pattern!r}"
        return match.group(group)

    def cell(self, table: str, row: str, column: str) -> str:
        """The cell of a table at ``row`` (its first cell) and ``column`` (its header), in
        the table whose header has a column ``table``."""
        split = [re.split(r"\s{2,}", line.strip()) for line in self.lines]
        start = next((i for i, cells in enumerate(split) if {table, column} <= set(cells)), None)
        assert start is not None, f"no table with columns {table!r} and {column!r}"
        header = split[start]
        for line, cells in zip(self.lines[start + 1 :], split[start + 1 :], strict=True):
            if not line or line.startswith(" "):
                break  # the table's end, or its notes
            if cells[0] == row:
                assert len(cells) == len(header), f"cannot split {line!r} into {header}"
                return cells[header.index(column)]
        raise AssertionError(f"no row {row!r} under {self.lines[start]!r}")


@pytest.fixture(scope="module")
def output() -> Output:
    """``python -m retry_transport.sim``'s output, run once for every test below."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main([]) == 0
    return Output(printed.getvalue())


# -- the tables --------------------------------------------------------------------------------

OUTPUT_BLOCKS = [block for path in DOCUMENTS for block in _blocks(path, "text")]


def test_the_output_blocks_are_found() -> None:
    """The README, the docs' home page and the simulator's page show the command's tables."""
    pages = {block.path for block in OUTPUT_BLOCKS}
    assert {"README.md", "docs/index.md", "docs/simulator.md"} <= pages
    assert len(OUTPUT_BLOCKS) >= 6


@pytest.mark.parametrize("block", OUTPUT_BLOCKS, ids=lambda b: f"{b.path}:{b.line}")
def test_a_text_block_is_the_commands_output(block: Block, output: Output) -> None:
    for line in block.code.splitlines():
        if line.strip():
            assert any(printed.startswith(line.rstrip()) for printed in output.lines), (
                f"{block.path}:{block.line}: not a line the command prints: {line!r}"
            )


# -- the figures in the prose ------------------------------------------------------------------

Reader = Callable[[Output], str]

# The tables, each named by a column of its own.
COMPARED, OUTAGE = "all succeed", "attempts in outage"
RATE, FLEET, TAIL, OVERLOAD = "respect_rate_limits", "store", "hedging", "attempts/accept"
PACED, GOODPUT = "True (pacing)", "200s/window mean (min-max)"
NONE, BUDGET, BREAKER = "no budget, no breaker", "RetryBudget()", "RetryBudget() + CircuitBreaker()"
WORDS = {4: "four", 6: "six"}


def found(pattern: str, group: int = 1) -> Reader:
    return lambda out: out.find(pattern, group)


def whole(table: str, row: str, column: str) -> Reader:
    """A table's cell: ``"0.06 s"``."""
    return lambda out: out.cell(table, row, column)


def cell(table: str, row: str, column: str) -> Reader:
    """A table's cell up to its first space: ``"1.6"`` of ``"1.6 (2)"``."""
    return lambda out: out.cell(table, row, column).split()[0]


def in_brackets(table: str, row: str, column: str) -> Reader:
    """What a table's cell has in brackets: ``"2"`` of ``"1.6 (2)"``."""
    return lambda out: out.cell(table, row, column).split("(")[1].split(")")[0]


def number(reader: Reader) -> Reader:
    """A figure without its trailing zeros: ``"50"`` of ``"50.0"``."""
    return lambda out: f"{float(reader(out)):g}"


def same(*readers: Reader) -> Reader:
    """The figure all ``readers`` give (a figure the page says holds for each row)."""

    def read(out: Output) -> str:
        values = {reader(out) for reader in readers}
        assert len(values) == 1, f"the rows differ: {values}"
        return values.pop()

    return read


def word(reader: Reader) -> Reader:
    """A small count in words: ``"six"`` for ``"6"``."""
    return lambda out: WORDS[int(reader(out))]


def _ranked(out: Output) -> list[int]:
    """Step 4's attempt counts, the one most runs have first."""
    counts = re.findall(r"(\d+): (\d+)", out.find(r"runs per attempt count: (.*?) \("))
    return [int(k) for k, _ in sorted(counts, key=lambda item: -int(item[1]))]


def first_cluster(out: Output) -> str:
    return str(_ranked(out)[0])


def second_cluster(out: Output) -> str:
    """The next two counts, next to each other: ``"23-24"``."""
    low, high = sorted(_ranked(out)[1:3])
    assert high == low + 1, f"the second cluster is not two counts: {_ranked(out)}"
    return f"{low}-{high}"


RUNS = found(r"Step 4 over ([\d,]+) runs")
STEP4_OK = found(r"all ok at ([\d.]+) s")
ALL_SIX = found(r"all 6 succeed in ([\d.]+%) of runs")
BY_075 = found(r"by 0\.75 s in ([\d.]+%) of runs")
RATE_OUTAGE = found(r"Poisson arrivals, ([\d.]+) requests/s")
OUTAGE_END = found(r"attempts starting in \[0, (\d+)\) s")
LAST_BREAK = found(r"breaks of [\d, ]*?(\d+) s, each ended")
TAIL_SUMMARY = (
    r"p99\.9 (\S+ ms) without, (\S+ ms) with Hedging\(0\.05\) \((\d+)x lower\), for ([\d.]+%) "
    r'more attempts and (\S+ ms) with Hedging\("p95"\) \((\d+)x lower\), for ([\d.]+%) more'
)
CHAIN_SUMMARY = (
    r"instead of ([\d,]+) \((\d+%) of the ([\d,]+) without it, up to (\d+) per request, the "
    r"last ([\d.]+ s) after"
)

WHY = (  # README.md and docs/index.md say the same
    "{} clients each send one {} ms call at once to a service that works on {} calls at a time",
    "(step 4: in the run shown by {} s; over its {} seeded runs, all six in {} of runs, by 0.75 s "
    "in {}). In its two-minute outage at {} requests a second, the retry budget holds the "
    "attempts reaching the service to {} of the requests, where plain retries triple them ({}).",
)
WHY_READERS: tuple[tuple[Reader, ...], ...] = (
    (word(found(r"(\d+) clients, one")), found(r"one (\d+) ms call each"),
     word(found(r"works on (\d+) calls at once"))),
    (STEP4_OK, RUNS, ALL_SIX, BY_075, RATE_OUTAGE, whole(OUTAGE, BUDGET, "of requests"),
     whole(OUTAGE, NONE, "of requests")),
)

#: (page, what it says with each figure a ``{}``, where each figure is in the output)
FIGURES: list[tuple[str, str, tuple[Reader, ...]]] = [
    *[(page, text, readers) for page in ("README.md", "docs/index.md")
      for text, readers in zip(WHY, WHY_READERS, strict=True)],
    # docs/simulator.md: the storm
    ("docs/simulator.md",
     "{} clients each send one {} ms call at t = 0 to a service that works on {} calls at once",
     (found(r"(\d+) clients, one"), found(r"one (\d+) ms call each"),
      found(r"works on (\d+) calls at once"))),
    ("docs/simulator.md", "Row 4 is one seeded run (seed {},", (found(r"seed (\d+): attempts"),)),
    ("docs/simulator.md",
     "the attempt count is bimodal, clustering at {} and at {}; `P(attempts <= 19)` is close to "
     "0.5 (at most 19 in {} of the {} runs above), so the median of a sample reads 19 or 20 ({} "
     "over those {} runs). In step 1 the 429 waits {} s:",
     (first_cluster, second_cluster, found(r"at most 19 in ([\d.]+%)"), RUNS,
      found(r"attempts median (\d+)"), RUNS, found(r"429 \(Retry-After: 1\) waited ([\d.]+) s"))),
    ("docs/simulator.md", "so all six succeed in {} of the runs",
     (whole(COMPARED, "RetryPolicy() defaults, no budget", COMPARED),)),
    # the outage
    ("docs/simulator.md",
     "Poisson arrivals at {} requests/s through one client for {} s, the service answering 503 "
     "for the first {}. Without a budget or breaker, {} attempts reach it during the outage ({} "
     "of the {} requests that arrive in it); with the default `RetryBudget()`, {} ({}); with "
     "`RetryBudget()` and `CircuitBreaker()`, {} ({}). The price is {} failed requests instead "
     "of {}, {} of them failed fast, and the first success {} after the service is back "
     "instead of {} (the breaker's break has grown to {} s by then).",
     (RATE_OUTAGE, found(r"requests/s for ([\d.]+) s"), OUTAGE_END,
      whole(OUTAGE, NONE, OUTAGE), whole(OUTAGE, NONE, "of requests"),
      same(*(whole(OUTAGE, row, "requests in outage") for row in (NONE, BUDGET, BREAKER))),
      whole(OUTAGE, BUDGET, OUTAGE), whole(OUTAGE, BUDGET, "of requests"),
      whole(OUTAGE, BREAKER, OUTAGE), whole(OUTAGE, BREAKER, "of requests"),
      whole(OUTAGE, BREAKER, "failed"), whole(OUTAGE, BUDGET, "failed"),
      whole(OUTAGE, BREAKER, "failed fast"), whole(OUTAGE, BREAKER, "first success after"),
      whole(OUTAGE, BUDGET, "first success after"), LAST_BREAK)),
    # the rate-limited API
    ("docs/simulator.md",
     "Then a rate-limited API: {} callers sending back to back through one client (about {} "
     "requests/s) to a service that allows {} requests per {} s window",
     (found(r"Rate-limited API: (\d+) callers"), found(r"the callers offer about (\d+) requests/s"),
      found(r"The service allows (\d+) requests per fixed"),
      found(r"The service allows \d+ requests per fixed (\S+) s window"))),
    ("docs/simulator.md",
     "the clients receive {} 429s in {} s (at most {} per window: only attempts already in "
     "flight when the quota runs out) and {} requests fail; without it, {} 429s and {} failed "
     "requests (the budget runs dry). Goodput is the quota either way ({} 200s per window); the "
     "price of pacing is latency, {} s on average instead of {} s.",
     (cell(RATE, PACED, "429s"), found(r"back to back for (\d+) s through one"),
      in_brackets(RATE, PACED, "429s/window mean (max)"),
      cell(RATE, PACED, "failed (stop reason)"), cell(RATE, "False", "429s"),
      cell(RATE, "False", "failed (stop reason)"),
      same(*(cell(RATE, row, GOODPUT) for row in (PACED, "False"))),
      cell(RATE, PACED, "latency mean (max)"), cell(RATE, "False", "latency mean (max)"))),
    # the fleet
    ("docs/simulator.md",
     "And a fleet: {} workers, each with its own `AsyncRetryTransport` (its own cooldowns and "
     "budget, as separate processes have), against an API that allows the fleet {} requests per "
     "{} s window",
     (found(r"A fleet sharing cooldowns: (\d+) workers"), found(r"The API allows (\d+) requests"),
      found(r"The API allows \d+ requests per fixed (\S+) s window"))),
    ("docs/simulator.md",
     "every worker meets the spent quota itself: {} 429s in {} s, {} per window. With one "
     "`MemoryStore` shared by their transports, one 429 pauses the fleet: {} 429s ({} per "
     "window:",
     (cell(FLEET, "none", "429s"), found(r"back to back for (\d+) s, each through"),
      cell(FLEET, "none", "429s/window mean (max)"), cell(FLEET, "MemoryStore()", "429s"),
      cell(FLEET, "MemoryStore()", "429s/window mean (max)"))),
    ("docs/simulator.md", "the same goodput ({} 200s per window) and latency.",
     (same(*(cell(FLEET, row, GOODPUT) for row in ("MemoryStore()", "none"))),)),
    # deadline propagation
    ("docs/simulator.md",
     "{} users each send one GET, at random times within {} s, to service 1, which calls "
     "service 2, which calls service 3, which calls a bottom service that is down (503 after "
     "{} ms). Every service makes up to {} attempts",
     (found(r"Deadline propagation: (\d+) users"), found(r"at a random time within (\S+) s"),
      found(r"503 after (\d+) ms"), found(r"\(full jitter, base [\d.]+ s, cap \d+ s, max (\d+) "
                                          r"attempts; budget=None\)"))),
    ("docs/simulator.md",
     "with per-attempt timeouts of {}, so one user request can reach the bottom {} times; a "
     "user waits {} s and gives up",
     (found(r"timeout per attempt of (.+?) \(services"), found(r"= (\d+) times"),
      found(r"A user waits (\S+) s"))),
    ("docs/simulator.md",
     "Without propagation, {} of the {} attempts at the bottom ({}) arrive after their user has "
     "gone, up to {} per request and the last {} later",
     (found(CHAIN_SUMMARY, 1), found(CHAIN_SUMMARY, 3), found(CHAIN_SUMMARY, 2),
      found(CHAIN_SUMMARY, 4), found(CHAIN_SUMMARY, 5))),
    # the tail at scale
    ("docs/simulator.md",
     "One client sends {} GETs at {} a second to a service whose calls take about {} ms "
     "(lognormal) and {} s in {} of cases",
     (found(r"one client sends ([\d,]+) GETs"), found(r"at a steady ([\d,]+) requests/s"),
      found(r"else lognormal, median (\S+) ms"), found(r"takes a time of its own: (\S+) s"),
      found(r"takes a time of its own: \S+ s with probability (\S+),"))),
    ("docs/simulator.md", "{} warm-up requests fill the latency table first",
     (found(r"after (\d+) uncounted warm-up requests"),)),
    ("docs/simulator.md",
     "The p99.9 falls from {} to {} with a fixed {} ms delay ({}x lower) for {} more attempts, "
     'and to {} with `"p95"` ({}x lower) for {} more; the service spends less time per request '
     "({} ms and {} ms instead of {} ms)",
     (found(TAIL_SUMMARY, 1), found(TAIL_SUMMARY, 2), number(cell(TAIL, "Hedging(0.05)", "delay")),
      found(TAIL_SUMMARY, 3), found(TAIL_SUMMARY, 4), found(TAIL_SUMMARY, 5),
      found(TAIL_SUMMARY, 6), found(TAIL_SUMMARY, 7),
      cell(TAIL, "Hedging(0.05)", "service time/request"),
      cell(TAIL, 'Hedging("p95")', "service time/request"),
      cell(TAIL, "none", "service time/request"))),
    # partial overload
    ("docs/simulator.md",
     "One client sends {} GETs a second for {} s to a service that can serve {} a second (a "
     "token bucket) and answers 503 at once beyond that: the budget alone, with "
     "`CircuitBreaker()`, and with `AdaptiveThrottle()`, counted from {} s on.",
     (found(r"one client sends (\d+) GETs per second"), found(r"for (\d+) s, [\d,]+ requests"),
      found(r"a capacity of (\d+) calls per second"), found(r"Counted from (\d+) s to"))),
    ("docs/simulator.md",
     "The throttle holds the attempts reaching the service to {} per accept (the budget alone: "
     "{}) for the same goodput, the full capacity, and fails {} requests at once without "
     "sending them; the breaker is all or nothing: it opens, its probe succeeds, it closes and "
     "opens again, for a goodput of {} a second.",
     (cell(OVERLOAD, "RetryBudget() + AdaptiveThrottle()", OVERLOAD),
      cell(OVERLOAD, "RetryBudget()", OVERLOAD),
      cell(OVERLOAD, "RetryBudget() + AdaptiveThrottle()", "refused, not sent"),
      cell(OVERLOAD, "RetryBudget() + CircuitBreaker()", "goodput/s"))),
    # the guides
    ("docs/guides/breaker.md",
     "The trade-off, from the two-minute outage at {} requests/s of `python -m "
     "retry_transport.sim` (see [the simulator](../simulator.md)): the breaker lets {} attempts "
     "reach the failing service where the budget alone lets {} (and no budget {}), and the "
     "application's first success comes {} after the service is back instead of {}, because "
     "the breaker only finds out with its next probe. It opened at {}, early in that outage,",
     (RATE_OUTAGE, whole(OUTAGE, BREAKER, OUTAGE), whole(OUTAGE, BUDGET, OUTAGE),
      whole(OUTAGE, NONE, OUTAGE), whole(OUTAGE, BREAKER, "first success after"),
      whole(OUTAGE, BUDGET, "first success after"), found(r"the breaker opened at ([\d.]+ s)"))),
    ("docs/guides/redis.md",
     "What it buys, from the fleet of `python -m retry_transport.sim` (see [the "
     "simulator](../simulator.md)): {} workers against an API that allows {} requests per {} s "
     "window and says so only with `429 Retry-After`: {} 429s in {} s without a store (each "
     "worker meets the spent quota itself), {} with one",
     (found(r"A fleet sharing cooldowns: (\d+) workers"), found(r"The API allows (\d+) requests"),
      found(r"The API allows \d+ requests per fixed (\S+) s window"), cell(FLEET, "none", "429s"),
      found(r"back to back for (\d+) s, each through"), cell(FLEET, "MemoryStore()", "429s"))),
    ("docs/guides/hedging.md",
     "The simulator's \"tail at scale\" section shows the effect on a service whose {} slowest "
     "calls take a second",
     (found(r"takes a time of its own: 1 s with probability (\S+),"),)),
]


def _page(path: str) -> str:
    return _flat((ROOT / path).read_text(encoding="utf-8"))


def test_every_page_that_quotes_the_command_is_checked() -> None:
    """A page that names the command beside a figure is in FIGURES (or shows its output)."""
    checked = {page for page, _, _ in FIGURES} | {block.path for block in OUTPUT_BLOCKS}
    quoting = {
        str(path.relative_to(ROOT)) for path in DOCUMENTS
        if "python -m retry_transport.sim" in path.read_text(encoding="utf-8")
        and re.search(r"\d[\d,.]*(%| s\b| ms\b|x\b)", path.read_text(encoding="utf-8"))
    }
    assert quoting - checked == set()


@pytest.mark.parametrize(
    ("page", "text", "readers"), FIGURES, ids=[f"{page}:{text[:40]}" for page, text, _ in FIGURES]
)
def test_a_figure_is_the_commands(
    page: str, text: str, readers: tuple[Reader, ...], output: Output
) -> None:
    assert text.count("{}") == len(readers)
    expected = text.format(*(reader(output) for reader in readers))
    assert expected in _page(page), f"{page} should say: {expected}"


# -- figures from the Python API -----------------------------------------------------------------


def _warm_breaker_opened() -> str:
    """The breaker after 30 s of healthy traffic: seconds into the outage when it opened."""
    result = run_outage(breaker=CircuitBreaker, outage=(30.0, 60.0))
    return f"{result.breaker_times('open')[0] - 30.0:.1f}"


#: (page, what it says with the figure a ``{}``, the call the page names)
API_FIGURES: list[tuple[str, str, Callable[[], str]]] = [
    ("docs/guides/breaker.md",
     "(`retry_transport.sim.run_outage(breaker=CircuitBreaker, outage=(30.0, 60.0))`, 100 "
     "requests/s), it opened {} s into the outage.", _warm_breaker_opened),
]


@pytest.mark.parametrize(
    ("page", "text", "compute"), API_FIGURES, ids=[page for page, _, _ in API_FIGURES]
)
def test_a_figure_is_the_apis(page: str, text: str, compute: Callable[[], str]) -> None:
    expected = text.format(compute())
    assert expected in _page(page), f"{page} should say: {expected}"


# -- the performance page: each instruction count from the one command beside it ---------------

#: An instruction count as the performance page gives it: ``+24,188``.
COUNT = re.compile(r"\+\d{1,3}(?:,\d{3})+")


def _performance_page() -> tuple[set[str], list[str]]:
    """docs/performance.md's instruction table's counts, and its prose's sentences (tables
    and code blocks left out)."""
    lines = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines()
    table: set[str] = set()
    prose: list[str] = []
    fenced = counting = False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("|"):
            counting = counting or "instructions over the bare transport" in line
            if counting:
                table.update(COUNT.findall(line))
        else:
            counting = False
            if not fenced:
                prose.append(line)
    sentences = re.split(r"(?<=[.;])\s+(?=[A-Z(`])", _flat("\n".join(prose)))
    return table, sentences


def test_the_performance_pages_counts_are_its_tables() -> None:
    """An instruction count in the prose is the table's, from the same run, unless its
    sentence names the command it comes from (``--against REF``: another tree's code). The
    page gave one arm two counts from two runs (async hedging +29,910 in a paragraph,
    +24,188 in the table)."""
    table, sentences = _performance_page()
    assert len(table) >= 10
    quoted = [(count, sentence) for sentence in sentences for count in COUNT.findall(sentence)]
    assert any(count in table for count, _ in quoted)
    for count, sentence in quoted:
        elsewhere = re.search(r"benchmarks/instructions\.py [^`]*--against", sentence)
        assert count in table or elsewhere, f"{count} is not the table's: {sentence}"


# -- the simulator's time: the runs benchmarks/sim_time.py recorded -----------------------------

#: What docs/simulator.md says of the default run's time, each figure a field of
#: benchmarks/sim_time.json (the record ``python benchmarks/sim_time.py --json`` writes).
SIM_TIME = (
    "What a default run takes, measured by `python benchmarks/sim_time.py --against {ref}` "
    "(the command run {runs} from a temporary directory with each tree's code, checked to "
    "be that tree's and not an installed copy, the trees in turn; medians) on a {cpus}-core "
    "{machine} VM ({cpu}, Python {python}, load average {before:.1f} before and {after:.1f} "
    "after): {real:.1f} s of real time and {cpu_time:.1f} s of CPU, its worker processes' "
    "included; the code before the scenarios moved from trio's `MockClock` to the jumping "
    "asyncio loop ({ref}): {old_real:.1f} s and {old_cpu:.1f} s"
)


def test_the_simulators_time_is_the_recorded_runs() -> None:
    """The simulator page's timing is benchmarks/sim_time.py's record of the default command
    (no options), the working tree's code against the ref it names. (The page gave one
    run's figures that a fresh install of the same code did not come near, with nothing to
    check them by.)"""
    record = json.loads((ROOT / "benchmarks" / "sim_time.json").read_text(encoding="utf-8"))
    assert record["command"] == "python -m retry_transport.sim"
    tree, old = record["trees"]
    assert tree["name"] == "working tree" and len(tree["runs"]) == len(old["runs"])
    expected = SIM_TIME.format(
        ref=old["name"], runs=_WORDS.get(len(tree["runs"]), len(tree["runs"])),
        cpus=record["cpus"], machine=record["machine"], cpu=record["cpu"],
        python=record["python"], before=record["load"][0], after=record["load"][1],
        real=tree["median"]["real"], cpu_time=tree["median"]["cpu"],
        old_real=old["median"]["real"], old_cpu=old["median"]["cpu"],
    )
    assert expected in _page("docs/simulator.md"), f"docs/simulator.md should say: {expected}"


_WORDS = {2: "twice", 3: "three times", 4: "four times", 5: "five times"}


# -- the idle limit's cost: the run benchmarks/idle.py recorded ---------------------------------

#: What docs/performance.md says of ``idle_timeout``'s cost, each figure a field of
#: benchmarks/idle.json (the record ``python benchmarks/idle.py --json`` writes).
IDLE_COST = (
    "`python benchmarks/idle.py` ({events:,} events, one per chunk, read to the end through a "
    "transport over `MockTransport`, only the read counted) measured {sync:,} instructions "
    "per event sync and {async_:,} async, on a read that costs {sync_read:,} and "
    "{async_read:,} per event without it"
)


def test_the_idle_limits_cost_is_the_recorded_run() -> None:
    """The performance page's cost of ``idle_timeout`` per event is benchmarks/idle.py's
    record, figure for figure."""
    record = json.loads((ROOT / "benchmarks" / "idle.json").read_text(encoding="utf-8"))
    expected = IDLE_COST.format(events=record["events"], sync=record["sync"],
                                async_=record["async"], sync_read=record["sync read"],
                                async_read=record["async read"])
    assert expected in _page("docs/performance.md"), f"docs/performance.md should say: {expected}"
