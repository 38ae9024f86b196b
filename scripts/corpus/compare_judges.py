#!/usr/bin/env python3
"""Before and after, per source, from two `buddy judge --json` outputs over the same corpus
(BENCHMARKS.md §12): solved runs stopped, runs warned, loops of 8+ identical calls that
brought nothing new ended by the 8th, and model calls saved on unsolved runs.

The 8+ loops are found by the AFTER judge's measurement (`repeats.eighth_at_model_call`,
`repeats.nothing_new`, which an older `buddy judge` does not print) and looked up by run in
both outputs: a loop is ended by the 8th when the judge's stop comes by the reply that made
the 8th call (or the 8 came in one reply, which buddy runs once).

usage: compare_judges.py BEFORE.jsonl AFTER.jsonl [--markdown]
"""
import json
import sys
from collections import defaultdict


def runs_of(path):
    """The judged runs of one `buddy judge --json` output, by (source, id)."""
    runs = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                run = json.loads(line)
            except json.JSONDecodeError:
                continue
            if run.get("type") == "summary" or "outcome" not in run:
                continue
            runs[(run.get("source", ""), run.get("id", ""))] = run
    return runs


def stopped(run):
    return run["outcome"] in ("stopped", "answer_rejected")


def warned(run):
    return any(i.get("action") == "warned" for i in run.get("interventions", []))


def ended_by(run, model_call, in_one_reply):
    stop = run.get("stop")
    return in_one_reply or (stop is not None and stop["after_model_call"] <= model_call)


def tally(before, after):
    rows = defaultdict(lambda: defaultdict(int))
    for key, a in after.items():
        b = before.get(key)
        if b is None:
            continue
        for source in (key[0], "all"):
            t = rows[source]
            t["runs"] += 1
            success = a.get("success")
            if success is True:
                t["solved"] += 1
                t["stopped_before"] += stopped(b)
                t["stopped_after"] += stopped(a)
            elif success is False:
                t["unsolved"] += 1
                t["unsolved_calls"] += a["model_calls"]
                if b["outcome"] == "stopped":
                    t["saved_before"] += b.get("model_calls_saved", 0)
                if a["outcome"] == "stopped":
                    t["saved_after"] += a.get("model_calls_saved", 0)
            t["warned_before"] += warned(b)
            t["warned_after"] += warned(a)
            rep = a.get("repeats", {})
            eighth = rep.get("eighth_at_model_call")
            if eighth is not None and rep.get("nothing_new"):
                one = bool(rep.get("eighth_in_one_reply"))
                t["long_loops"] += 1
                t["long_before"] += ended_by(b, eighth, one)
                t["long_after"] += ended_by(a, eighth, one)
    return rows


def pct(part, whole):
    return "-" if whole == 0 else f"{100.0 * part / whole:.1f}%"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    before, after = runs_of(args[0]), runs_of(args[1])
    rows = tally(before, after)
    order = sorted(k for k in rows if k != "all") + ["all"]
    md = "--markdown" in sys.argv
    head = ["source", "runs", "solved", "solved stopped before", "after",
            "runs warned before", "after", "8+ loops ended by the 8th before", "after",
            "calls saved (unsolved) before", "after"]
    if md:
        print("| " + " | ".join(head) + " |")
        print("|---|" + "---:|" * (len(head) - 1))
    else:
        print("\t".join(head))
    for source in order:
        t = rows[source]
        cells = [
            source, f"{t['runs']:,}", f"{t['solved']:,}",
            f"{t['stopped_before']} ({pct(t['stopped_before'], t['solved'])})",
            f"{t['stopped_after']} ({pct(t['stopped_after'], t['solved'])})",
            f"{t['warned_before']:,}", f"{t['warned_after']:,}",
            f"{t['long_before']}/{t['long_loops']}" if t["long_loops"] else "–",
            f"{t['long_after']}/{t['long_loops']}" if t["long_loops"] else "–",
            pct(t["saved_before"], t["unsolved_calls"]),
            pct(t["saved_after"], t["unsolved_calls"]),
        ]
        if md:
            name = f"**{source}**" if source == "all" else source
            cells[0] = name
            print("| " + " | ".join(cells) + " |")
        else:
            print("\t".join(cells))
    missing = len(set(after) ^ set(before))
    if missing:
        print(f"({missing} run(s) judged by only one of the two were left out)")


if __name__ == "__main__":
    main()
