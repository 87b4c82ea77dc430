"""The quality/speed frontier: QA retention of every mode against its TTFT speedup over direct at
about 2,048 context tokens.

Retention (score / direct score, with its bootstrap 95% CI) comes from `cag eval` run folders;
speedup from benchmarks/bench_translated_speed.py (one alternating run, every ask mode). The two are
measured separately: eval passages are short (SQuAD averages 161 tokens), and the speedup that
matters is at long contexts.

Usage: python benchmarks/plot_frontier.py --speed records/translated_speed-M.json
           --eval NAME=RUN_DIR [--eval NAME=RUN_DIR ...] [--out runs/benchmarks/frontier-M.png]
Each --eval is one series (e.g. "SQuAD 200=records/eval/squad-200-..."); a series may
rename a mode with NAME=RUN_DIR:mode=label (e.g. translated=MoT cloze) to tell translators apart.
Writes the PNG and a JSON beside it, and prints a markdown table.
"""

import argparse
import json
from pathlib import Path

# eval mode -> the speed benchmark's label for it (translated modes: translating during the ask)
SPEED_LABEL = {"direct": "direct", "native": "native", "none": "none",
               "translated": "translated (translating)", "single": "single (translating)",
               "ridge": "ridge (translating)", "translated-window": "translated-window (translating)"}


def parse_series(arg: str) -> tuple[str, Path, dict]:
    name, _, rest = arg.partition("=")
    path, *renames = rest.split(":")
    return name, Path(path), dict(r.split("=", 1) for r in renames)


def frontier_points(speed: dict, series: list) -> list[dict]:
    speedup = speed["speedup_vs_direct"]
    points = []
    for name, run, renames in series:
        metrics = json.loads((run / "metrics.json").read_text())
        run_config = json.loads((run / "config.json").read_text())
        share = run_config.get("blend", 0.15)
        select = run_config.get("blend_select", "deviation")
        setting = f"{share}" if select == "deviation" else f"{share}/{select}"
        for mode, m in metrics["modes"].items():
            label = SPEED_LABEL.get(mode)
            if mode.endswith("-blend"):  # the speed benchmark times each recomputed share and selection
                label = f"{mode}@{setting}" + (" (translating)" if mode.startswith("translated") else "")
                renames = {mode: f"{mode} {setting.replace('/', ' ')}", **renames}
            if label not in speedup:
                continue
            point = {"series": name, "mode": renames.get(mode, mode), "retention": m["retention"],
                     "ci95": m["retention_ci95"], "speedup": speedup[label], "n": m["n"]}
            seen = (point["mode"], point["retention"], point["speedup"])
            if any((p["mode"], p["retention"], p["speedup"]) == seen for p in points):
                continue  # the same predictions shared by several series (forked runs): once
            points.append(point)
            stored = label.replace("(translating)", "(stored)")
            if mode in ("translated", "translated-blend") and stored != label and stored in speedup:
                points.append({**points[-1], "mode": points[-1]["mode"] + " (stored)",  # translations reused
                               "speedup": speedup[stored]})
    return points


def plot(points: list[dict], out: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    markers = "osD^v<>"
    for i, name in enumerate(dict.fromkeys(p["series"] for p in points)):
        mine = [p for p in points if p["series"] == name]
        xs, ys = [p["speedup"] for p in mine], [p["retention"] for p in mine]
        errors = [[p["retention"] - p["ci95"][0] for p in mine], [p["ci95"][1] - p["retention"] for p in mine]]
        ax.errorbar(xs, ys, yerr=errors, fmt=markers[i % len(markers)], capsize=3, label=name, alpha=0.8)
        for p in mine:
            ax.annotate(p["mode"], (p["speedup"], p["retention"]), textcoords="offset points",
                        xytext=(5, 4), fontsize=7)
    ax.axhline(0.95, color="grey", linestyle=":", linewidth=1)
    ax.axvline(3.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("TTFT speedup over direct at ~2,048 context tokens (log)")
    ax.set_ylabel("QA retention (score / direct), 95% CI")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", type=Path, required=True)
    parser.add_argument("--eval", action="append", required=True, help="NAME=RUN_DIR[:mode=label...]")
    parser.add_argument("--out", type=Path, help="the PNG (default runs/benchmarks/frontier-GENERATOR.png)")
    args = parser.parse_args()
    speed = json.loads(args.speed.read_text())
    points = frontier_points(speed, [parse_series(e) for e in args.eval])
    out = args.out or Path(__file__).resolve().parents[1] / "runs" / "benchmarks" / f"frontier-{speed['generator']}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(points, out, f"{speed['encoder']} -> {speed['generator']}: quality / speed frontier")
    out.with_suffix(".json").write_text(json.dumps({"speed": str(args.speed), "points": points}, indent=2))
    print("| series | mode | retention [95% CI] | TTFT speedup vs direct |")
    print("|---|---|---|---|")
    for p in points:
        print(f"| {p['series']} | {p['mode']} | {p['retention']} [{p['ci95'][0]}, {p['ci95'][1]}] | "
              f"{p['speedup']}x |")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
