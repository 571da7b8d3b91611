"""The benchmarks' statistics, in one place: the mean of a sample with its 95% interval.

The bench scripts' Python parts import this (`sys.path.insert(0, "bench")`; they run from the
repository's root) so that every table states its intervals the same way.
"""
import statistics

# Student's t quantile of a two-sided 95% interval for 1..9 degrees of freedom; above that the
# Cornish-Fisher expansion about the normal quantile, within 0.003 of the exact value.
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262]
_Z = 1.959964


def t95(n):
    """The t quantile for a 95% interval on the mean of n values (n - 1 degrees of freedom)."""
    df = max(n - 1, 1)
    if df < 10:
        return _T95[df - 1]
    z = _Z
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def mean_ci95(xs):
    """(mean, half-width of its 95% interval); the half-width is 0 for a single value."""
    n, m = len(xs), statistics.mean(xs)
    if n < 2:
        return m, 0.0
    return m, t95(n) * statistics.stdev(xs) / n**0.5
