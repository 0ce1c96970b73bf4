#!/usr/bin/env python3
"""Fit the polynomials of kernels/exp.h and print them as C constants.

Usage: fit-exp-poly.py        (needs mpmath: pip install mpmath, or Debian's
                               python3-mpmath)

Two fits, both minimising the maximum relative error p(r)/f(r) - 1 by the
Remez exchange algorithm in 40-digit arithmetic:

  e^r on [-ln2/2, ln2/2], degree 6, 1 + r + r^2/2 pinned
      (peak_exp: e^x = 2^n e^r after a Cody-Waite reduction; the softmax's
      2^-k e^a too)
  2^r on [0, 1), degree 5, p(0) = 1 pinned
      (attention: 2^t = 2^floor(t) 2^r)

Coefficients are rounded to float one at a time, lowest degree first, and
the remaining ones refitted after each rounding, so that the later free
coefficients absorb the earlier roundings (a poor man's fpminimax).  The maximum
relative error printed is that of the float coefficients, on a fine grid.
"""

import struct
import sys

try:
    import mpmath as mp
except ImportError:
    sys.exit("fit-exp-poly.py: needs mpmath (pip install mpmath)")

mp.mp.dps = 40


def to_float(x):
    """x rounded to the nearest IEEE single."""
    return mp.mpf(struct.unpack("f", struct.pack("f", float(x)))[0])


def remez(f, degree, pinned, a, b, iterations=60, grid=3000):
    """Coefficients minimising max |p/f - 1| on [a, b], p's coefficients in
    `pinned` (degree -> value) held fixed.  Returns ({degree: coef}, error)."""
    free = [k for k in range(degree + 1) if k not in pinned]
    n = len(free)
    points = [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (n - i) / n) for i in range(n + 1)]
    coef, worst = {}, None
    for _ in range(iterations):
        # Solve p(x_i) - f(x_i) = (-1)^i E f(x_i) for the free coefficients and E.
        m = mp.matrix(n + 1, n + 1)
        rhs = mp.matrix(n + 1, 1)
        for i, x in enumerate(points):
            for col, k in enumerate(free):
                m[i, col] = x ** k
            m[i, n] = -((-1) ** i) * f(x)
            rhs[i] = f(x) - sum(v * x ** k for k, v in pinned.items())
        sol = mp.lu_solve(m, rhs)
        coef = dict(pinned)
        coef.update({k: sol[col] for col, k in enumerate(free)})

        def err(x):
            return sum(v * x ** k for k, v in coef.items()) / f(x) - 1

        xs = [a + (b - a) * j / grid for j in range(grid + 1)]
        ys = [err(x) for x in xs]
        worst = max(abs(y) for y in ys)
        # New reference: the largest error of each run of equal sign.
        extrema = [0] + [j for j in range(1, grid)
                         if (ys[j] - ys[j - 1]) * (ys[j + 1] - ys[j]) <= 0] + [grid]
        runs = []
        for j in extrema:
            if runs and mp.sign(ys[j]) == mp.sign(ys[runs[-1]]):
                if abs(ys[j]) > abs(ys[runs[-1]]):
                    runs[-1] = j
            else:
                runs.append(j)
        if len(runs) < n + 1:
            break
        while len(runs) > n + 1:
            runs.pop(0 if abs(ys[runs[0]]) < abs(ys[runs[-1]]) else -1)
        points = [xs[j] for j in runs]
    return coef, worst


def fit_float(f, degree, pinned, a, b):
    """Round coefficients to float one by one, refitting the rest."""
    pinned = dict(pinned)
    for k in range(degree + 1):
        if k in pinned:
            continue
        coef, _ = remez(f, degree, pinned, a, b)
        pinned[k] = to_float(coef[k])

    def err(x):
        return sum(v * x ** k for k, v in pinned.items()) / f(x) - 1

    grid = 20000
    worst = max(abs(err(a + (b - a) * j / grid)) for j in range(grid + 1))
    return pinned, worst


def show(name, prefix, coef, worst, skip):
    print(f"/* {name}: max relative error {mp.nstr(worst, 3)} "
          f"(2^{mp.nstr(mp.log(worst, 2), 4)}) */")
    for k in sorted(coef):
        if k in skip:
            continue
        print(f"#define {prefix}{k} {float(coef[k]).hex().replace('0000000p', 'p')}f")


def main():
    ln2 = mp.log(2)
    pins = {0: mp.mpf(1), 1: mp.mpf(1), 2: mp.mpf(1) / 2}
    coef, worst = fit_float(mp.exp, 6, pins, -ln2 / 2, ln2 / 2)
    show("e^r on [-ln2/2, ln2/2], degree 6", "PEAK_EXP_C", coef, worst, skip=(0, 1))
    coef, worst = fit_float(lambda r: 2 ** r, 5, {0: mp.mpf(1)}, mp.mpf(0), mp.mpf(1))
    show("2^r on [0, 1), degree 5", "PEAK_EXP2_C", coef, worst, skip=(0,))


if __name__ == "__main__":
    main()
