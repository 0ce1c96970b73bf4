#!/usr/bin/env python3
"""Fit the odd polynomial of kernels/tanh.h and print it as C constants.

Usage: fit-tanh-poly.py [T0 [DEGREE]]   (defaults 1 6: tanh.h's; needs numpy,
                                        Debian's python3-numpy, nothing else)

tanh(t) for |t| < T0 is t + t^3 P(t^2): P of DEGREE in s = t^2 minimises
the maximum relative error of the whole, |(t + t^3 P(s)) / tanh(t) - 1|,
over 0 < t < T0.  With g(s) = (tanh(t) - t) / t^3 that is a weighted
minimax fit of P to g, weight s^1.5 / tanh(sqrt(s)) (vanishing at 0: the
exact leading t carries small arguments on its own).  Remez exchange in
float64: g comes from tanh's Taylor series (Bernoulli numbers, exact
fractions, so no cancellation in tanh(t) - t), summed in float64 to
1e-16 relative, far below the fit's own error (5e-9 for tanh.h's).

Coefficients are rounded to float one at a time, lowest degree first, and
the remaining ones refitted after each rounding (scripts/fit-exp-poly.py's
method).  The maximum relative error printed is that of the float
coefficients, on a fine grid, in exact-coefficient arithmetic (float64):
the fit's share of the error budget, before the float evaluation's own
roundings, which scripts/tanh-bound.c measures.
"""

import struct
import sys
from fractions import Fraction
from math import comb, factorial

import numpy as np

TERMS = 40  # Taylor terms of g: successive ones shrink by (2/pi)^2 s <= 0.41 for s <= 1


def bernoulli(n_max):
    """B_0 .. B_n_max as exact fractions (B_1 = -1/2)."""
    b = [Fraction(1)]
    for m in range(1, n_max + 1):
        b.append(-sum(comb(m + 1, k) * b[k] for k in range(m)) / (m + 1))
    return b


def g_series():
    """Coefficients of g(s) = (tanh(t) - t) / t^3 in s = t^2, as float64:
    tanh t = sum_{n>=1} 2^2n (2^2n - 1) B_2n t^(2n-1) / (2n)!."""
    b = bernoulli(2 * (TERMS + 2))
    c = []
    for n in range(2, TERMS + 2):
        c.append(float(Fraction(4 ** n * (4 ** n - 1)) * b[2 * n] / factorial(2 * n)))
    return np.array(c)


G = g_series()


def g(s):
    """(tanh(t) - t) / t^3 for s = t^2 (Horner over the series)."""
    acc = np.zeros_like(s)
    for c in G[::-1]:
        acc = acc * s + c
    return acc


def weight(s):
    """t^3 / tanh(t): the factor from an error in P to the relative error
    of t + t^3 P."""
    t = np.sqrt(s)
    return s * t / np.tanh(t)


def poly(coef, s):
    acc = np.zeros_like(s)
    for c in coef[::-1]:
        acc = acc * s + c
    return acc


def remez(degree, pinned, a, b, iterations=50, grid=20000):
    """P's coefficients (list, lowest first) minimising max |w (P - g)| on
    [a, b], those in `pinned` (degree -> value) held fixed."""
    free = [k for k in range(degree + 1) if k not in pinned]
    n = len(free)
    xs = a + (b - a) * (1 - np.cos(np.pi * np.arange(grid + 1) / grid)) / 2
    points = (a + b) / 2 - (b - a) / 2 * np.cos(np.pi * np.arange(n + 1) / n)
    coef = None
    for _ in range(iterations):
        # w(x_i) (P(x_i) - g(x_i)) = (-1)^i E for the free coefficients and E.
        m = np.zeros((n + 1, n + 1))
        rhs = g(points) - sum(v * points ** k for k, v in pinned.items())
        for col, k in enumerate(free):
            m[:, col] = points ** k
        m[:, n] = -((-1.0) ** np.arange(n + 1)) / weight(points)
        sol = np.linalg.solve(m, rhs)
        coef = np.zeros(degree + 1)
        for k, v in pinned.items():
            coef[k] = v
        for col, k in enumerate(free):
            coef[k] = sol[col]
        ys = weight(xs) * (poly(coef, xs) - g(xs))
        # New reference: the largest error of each run of equal sign.
        runs = []
        for j in range(grid + 1):
            if runs and np.sign(ys[j]) == np.sign(ys[runs[-1]]):
                if abs(ys[j]) > abs(ys[runs[-1]]):
                    runs[-1] = j
            else:
                runs.append(j)
        if len(runs) < n + 1:
            break
        while len(runs) > n + 1:
            runs.pop(0 if abs(ys[runs[0]]) < abs(ys[runs[-1]]) else -1)
        new = xs[runs]
        if np.allclose(new, points, rtol=0, atol=1e-15):
            break
        points = new
    return coef


def to_float(x):
    """x rounded to the nearest IEEE single."""
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def relative_error(coef, t0):
    """max |(t + t^3 P(t^2)) / tanh(t) - 1| on a fine grid of (0, t0]."""
    t = np.linspace(t0 / 200000, t0, 200000)
    s = t * t
    return np.max(np.abs(weight(s) * (poly(coef, s) - g(s))))


def main():
    t0 = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    degree = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    a, b = (t0 / 1000) ** 2, t0 * t0
    exact = remez(degree, {}, a, b)
    pinned = {}
    for k in range(degree + 1):
        pinned[k] = to_float(remez(degree, pinned, a, b)[k])
    coef = np.array([pinned[k] for k in range(degree + 1)])
    err_exact, err = relative_error(exact, t0), relative_error(coef, t0)
    print(f"/* t + t^3 P(t^2) on (0, {t0}), P of degree {degree}: max relative error "
          f"{err:.3g} (2^{np.log2(err):.2f}; unrounded coefficients {err_exact:.3g}) */")
    for k, c in enumerate(coef):
        print(f"#define PEAK_TANH_P{k} {float(c).hex().replace('0000000p', 'p')}f")


if __name__ == "__main__":
    main()
