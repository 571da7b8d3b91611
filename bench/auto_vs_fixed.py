"""swarm.compression = auto against fixed settings, from a link benchmark's runs (one JSON
object per run: round, run, tokens_per_s, val_loss, bytes): the medians over rounds as a
table, the fastest fixed setting, and auto's tokens/s over the fastest fixed run of each
round (bench/auto_links.sh, bench/auto_densities.sh)."""
import statistics


def compare(runs, fixed, machine, title, bytes_label):
    rounds = sorted({r["round"] for r in runs})

    def get(name, rnd, key):
        return next(r[key] for r in runs if r["run"] == name and r["round"] == rnd)

    names = fixed + ["auto"]
    med = {n: statistics.median(get(n, r, "tokens_per_s") for r in rounds) for n in names}
    loss = {n: statistics.median(get(n, r, "val_loss") for r in rounds) for n in names}
    mb = {n: statistics.median(get(n, r, "bytes") for r in rounds) / 1e6 for n in names}
    best = max(fixed, key=lambda n: med[n])
    ratios = [get("auto", r, "tokens_per_s") / max(get(n, r, "tokens_per_s") for n in fixed)
              for r in rounds]
    print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB")
    print(f"{title}, {len(rounds)} rounds")
    print(f"{'run':<8}{'tokens/s':>10}{'val loss':>10}{bytes_label:>9}")
    for n in names:
        print(f"{n:<8}{med[n]:>10.0f}{loss[n]:>10.4f}{mb[n]:>9.1f}")
    print(f"fastest fixed: {best}; auto / fastest fixed of each round: "
          + ", ".join(f"{x:.3f}" for x in ratios) + f" (median {statistics.median(ratios):.3f})")
    return len(rounds), {"tokens_per_s_median": med, "val_loss_median": loss, "mb_median": mb,
                         "best_fixed": best, "auto_to_best_fixed": ratios,
                         "auto_to_best_fixed_median": statistics.median(ratios)}
