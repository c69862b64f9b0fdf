"""Grade tiled_attention's corpus under several seeds, by hand (the suite grades it under one).

    .venv/bin/python scripts/tiled_seeds.py [SEED ...]     (default: 12345 1 2 3 4)

Prints one line per file: its scores and the families it lost under each seed, and whether the
verdict is what its header expects (correct: 100; buggy: its family lost, and only it for a
single-bug file) and the same under every seed. Exit status 1 if any is not.
"""
import glob
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from grader.grading import grade_source  # noqa: E402

CORPUS = os.path.join(os.path.dirname(HERE), "tests", "corpus", "tiled_attention")


def header(path):
    with open(path, encoding="utf-8") as f:
        text = f.read(600)
    first = text.splitlines()[0]
    family = first.split(":", 1)[1].strip() if first.startswith("# expect:") else None
    return family, any(line.startswith("# bugs: several") for line in text.splitlines())


def main(seeds):
    files = sorted(glob.glob(os.path.join(CORPUS, "*", "*.py")))
    started = time.monotonic()

    def grade(job):
        path, seed = job
        with open(path, "rb") as f:
            return job, grade_source(f.read(), "tiled_attention", seed=seed, sandbox="auto").to_dict()

    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = dict(pool.map(grade, [(p, s) for p in files for s in seeds]))
    bad = 0
    for path in files:
        family, several = header(path)
        rows = [reports[(path, s)] for s in seeds]
        lost = [sorted({c["id"].split(".")[0] for c in r["checks"] if c["max_points"] and c["points"] < c["max_points"]})
                for r in rows]
        causes = [[c["diagnosis"] for c in r["causes"]] for r in rows]
        if family is None:
            ok = all(r["score"] == 100 for r in rows)
        else:
            ok = all(family in fams and (several or fams == [family]) for fams in lost)
        same = len({r["score"] for r in rows}) == 1 and len({tuple(f) for f in lost}) == 1
        bad += not (ok and same)
        print(f"{'ok ' if ok and same else 'BAD'} {os.path.relpath(path, CORPUS):48s} scores={[r['score'] for r in rows]} "
              f"lost={lost[0]} causes={causes[0]}")
    print(f"{len(files)} files x {len(seeds)} seeds in {time.monotonic() - started:.0f} s; {bad} not as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main([int(s) for s in sys.argv[1:]] or [12345, 1, 2, 3, 4]))
