"""Grade the corpora under more seeds than `make test` can afford, and say what moved.

    .venv/bin/python scripts/grade_corpus.py --seeds 5                 # every task, five draws
    .venv/bin/python scripts/grade_corpus.py --task tiled_attention --seeds 5
    .venv/bin/python scripts/grade_corpus.py --files sdpa_backward/buggy/idl_ --seeds 5 --causes

Every file is graded at the server's level (``auto``) under each seed, two at a time (as the
service's workers do). It prints one line per file whose grade breaks a corpus rule, and a table
per task:

- a correct file (no ``# expect:`` line) that scores below 100 under some seed;
- a buggy file that keeps its family's points, or loses points in another family (``# bugs:
  several`` files may), under some seed;
- a file whose score or charged families differ between seeds.

The table counts the single-bug files whose summary names exactly one cause under every seed
(the suite asks at least 80 % of them for the tasks it lists in NAMED), and lists the others.

Exit status 1 when any rule is broken. The rules are tests/test_grader_corpus.py's; this only
draws more seeds than the suite's two.
"""
from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from grader.causes import concept_of  # noqa: E402
from grader.grading import grade_source  # noqa: E402
from grader.tasks import TASKS  # noqa: E402
from test_grader_corpus import ELSEWHERE, FILES, _lost, _name, _task, expected_family, several_bugs  # noqa: E402


def concept(path: str, family: str, report: dict) -> set:
    """The families a single bug of ``family`` may cost: its task's concept (grader/causes.py), and
    the families a failed check of ``family`` gates (tiled_attention's key streaming carries online,
    stability and memory), as test_one_bug_is_charged_once allows."""
    failed = {c["id"] for c in report["checks"] if not c["passed"]}
    gated = {g for c in TASKS[_task(path)].checks if c.id.split(".")[0] == family and c.id in failed
             for g in c.gates}
    return concept_of(family, TASKS[_task(path)].concepts) | gated


def problems(path: str, reports: list[dict]) -> list[str]:
    family, found = expected_family(path), []
    scores = [r["score"] for r in reports]
    if len(set(scores)) > 1 or len({frozenset(_lost(r)) for r in reports}) > 1:
        found.append(f"differs between seeds: scores {scores}, lost {[sorted(_lost(r)) for r in reports]}")
    for r in reports:
        if family is None and r["score"] != 100:
            found.append(f"correct file scored {r['score']}: {r['summary'][:160]}")
        elif family and family not in _lost(r) and family != "forbidden":
            found.append(f"kept its family {family}'s points (lost {sorted(_lost(r))})")
        elif family and family != "forbidden" and not several_bugs(path) and _lost(r) - concept(path, family, r):
            found.append(f"lost points outside {family}: {sorted(_lost(r) - concept(path, family, r))}")
    return sorted(set(found))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="how many seeds (1, 2, ... n)")
    parser.add_argument("--task", help="only this task's corpus")
    parser.add_argument("--files", nargs="+", metavar="PART",
                        help="only the files whose name (<task>/<correct|buggy>/<file>, elsewhere/<task>/<file>) "
                             "contains one of these")
    parser.add_argument("--causes", action="store_true",
                        help="print each file's score and the causes its summary names, per seed")
    args = parser.parse_args()
    files = [f for f in FILES + ELSEWHERE if args.task in (None, _task(f))
             and (not args.files or any(part in _name(f) for part in args.files))]
    if not files:
        parser.error(f"no corpus files for task {args.task!r}")
    seeds = list(range(1, args.seeds + 1))

    def grade(job):
        path, seed = job
        with open(path, "rb") as f:
            return job, grade_source(f.read(), _task(path), seed=seed, sandbox="auto").to_dict()

    with ThreadPoolExecutor(max_workers=2) as pool:
        graded = dict(pool.map(grade, [(f, s) for f in files for s in seeds]))
    broken, named, single = 0, {}, {}
    for path in files:
        reports = [graded[(path, s)] for s in seeds]
        task = _task(path)
        if expected_family(path) not in (None, "forbidden") and not several_bugs(path):
            single[task] = single.get(task, 0) + 1
            one = all(len(r.get("causes") or []) == 1 for r in reports)
            named[task] = named.get(task, 0) + one
            if not one:
                print(f"{_name(path)}: note: names {sorted({len(r.get('causes') or []) for r in reports})} causes")
        if args.causes:
            said = sorted({c["diagnosis"] for r in reports for c in r.get("causes") or []})
            print(f"{_name(path)}: scores {sorted({r['score'] for r in reports})}; "
                  f"causes {said}; {reports[0]['summary'][:200]}")
        for problem in problems(path, reports):
            broken += 1
            print(f"{_name(path)}: {problem}")
    for task in sorted({_task(f) for f in files}):
        mine = [f for f in files if _task(f) == task]
        print(f"{task}: {len(mine)} files x {len(seeds)} seeds; single-bug files naming exactly one cause "
              f"under every seed: {named.get(task, 0)}/{single.get(task, 0)}")
    print(f"{broken} problem(s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
