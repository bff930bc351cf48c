#!/usr/bin/env python3
"""Fixtures for stats.MannWhitneyU: scipy.stats.mannwhitneyu results.

Run from the repository root with a Python that has scipy and numpy:
    python3 stats/testdata/mannwhitneyu.py > stats/testdata/mannwhitneyu.json
Every case is two-sided with use_continuity=True; samples come from a seeded
numpy RandomState so the file is reproducible.
"""
import json

import numpy as np
import scipy
from scipy.stats import mannwhitneyu

rs = np.random.RandomState(20261203)
cases = []


def add(name, x, y, methods=("auto", "exact", "asymptotic")):
    x = [float(v) for v in x]
    y = [float(v) for v in y]
    for method in methods:
        res = mannwhitneyu(x, y, use_continuity=True, alternative="two-sided", method=method)
        cases.append({
            "name": f"{name}/{method}",
            "x": x,
            "y": y,
            "method": method,
            "u": float(res.statistic),
            "p": float(res.pvalue),
        })


# The scipy documentation example (Shier 2004): U = 17, exact p = 0.1111.
add("shier", [19, 22, 16, 29, 24], [20, 11, 17, 12])
add("disjoint-3x3", [1, 2, 3], [4, 5, 6])
add("one-each", [1.5], [0.5])
add("1x9", [5.0], list(range(10, 19)))
add("equal-U", [1, 4, 5, 8], [2, 3, 6, 7])
for n1, n2 in [(4, 7), (8, 8), (8, 9), (6, 20), (3, 40), (9, 9), (12, 10), (25, 30)]:
    add(f"normal-{n1}x{n2}", rs.normal(0, 1, n1), rs.normal(0.5, 1, n2))
# Exact and asymptotic on sizes 'auto' sends to the normal approximation.
add("lognormal-40x35", rs.lognormal(3, 0.2, 40), rs.lognormal(3.1, 0.2, 35))
add("shifted-60x60", rs.normal(0, 1, 60), rs.normal(1.5, 1, 60), methods=("auto", "exact"))
add("8x300", rs.normal(0, 1, 8), rs.normal(0.3, 1, 300))
# Ties: 'auto' goes asymptotic with the tie correction.
add("ties-small", [1, 2, 2, 3], [2, 3, 3, 4, 5])
add("ties-rounded-50x50", np.round(rs.normal(10, 2, 50)), np.round(rs.normal(11, 2, 50)),
    methods=("auto", "asymptotic"))
add("all-tied", [3, 3, 3], [3, 3, 3, 3], methods=("auto", "asymptotic"))
add("identical", [1, 2, 3, 4], [1, 2, 3, 4])
add("negative-and-huge", [-5, -1, 1e300, 2], [-3, 0, 1, 7, 9])
# Large samples: only the normal approximation.
add("large-1000x800", rs.lognormal(4, 0.3, 1000), rs.lognormal(4.02, 0.3, 800),
    methods=("auto", "asymptotic"))

print(json.dumps({"scipy": scipy.__version__, "numpy": np.__version__, "cases": cases}, indent=1))
