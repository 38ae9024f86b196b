#!/usr/bin/env python3
"""Converts the SWE-agent runs on SWE-bench Lite that the AutoCodeRover authors published next to
their own results (nus-apr/auto-code-rover, results/swe-agent-results/cost_2_{1,2,3}: three runs
of SWE-agent 0.x with gpt4-0125 = gpt-4-0125-preview, $2 cost limit per instance, 275-276
trajectories of the 300 Lite tasks each) into OpenAI Chat Completions conversations, one per line.

usage: acr_sweagent_lite.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl

Reads git objects only. A run directory holds <instance>.traj (SWE-agent 0.x trajectories),
all_preds.jsonl (the patch of every instance the run finished) and final_report.json (the
evaluation the AutoCodeRover authors ran on those patches: "stats" and
"resolved_per_project").

success: true if the instance is in final_report.json resolved_per_project; false if it has a
non-empty model_patch in all_preds.jsonl but is not resolved (final_report "generated" =
"with_logs" = the count of such patches, so all of them were evaluated); otherwise null (no
patch, so nothing was evaluated).

Messages and tools: the trajectory converted by sweagent0.py (see there): the "history" the model
saw, each text action one tool call; the harness's own exit turns left out (counted on stderr).
"""
import json
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ beside the scripts
import corpus_common as cc  # noqa: E402
import sweagent0  # noqa: E402


def labels(git_dir, commit, run_dir):
    """instance id -> True/False from final_report.json and all_preds.jsonl (see above)."""
    lab = {}
    preds = cc.blob_or_none(git_dir, commit, f"{run_dir}/all_preds.jsonl")
    for line in (preds or b"").decode().splitlines():
        if line.strip():
            p = json.loads(line)
            if (p.get("model_patch") or "").strip():
                lab[p["instance_id"]] = False
    rep = cc.blob_or_none(git_dir, commit, f"{run_dir}/final_report.json")
    if rep is None:
        return {}
    for ids in (json.loads(rep).get("resolved_per_project") or {}).values():
        for i in ids:
            lab[i] = True
    return lab


def main():
    a = cc.arg_parser().parse_args()

    base = "results/swe-agent-results"
    names = cc.file_names(a.git_dir, a.commit, base)
    runs = sorted({p.rsplit("/", 1)[0] for p in names if p.endswith(".traj")})
    # SWE-agent's model shortcut gpt4-0125 (the run name's first part) is gpt-4-0125-preview.
    models = {"gpt4-0125": "gpt-4-0125-preview"}
    with cc.Output(a) as out:
        for run_dir in runs:
            lab = labels(a.git_dir, a.commit, run_dir)
            run = run_dir.rsplit("/", 1)[-1]
            model = None
            preds = cc.blob_or_none(a.git_dir, a.commit, f"{run_dir}/all_preds.jsonl")
            for line in (preds or b"").decode().splitlines():
                if line.strip():
                    short = (json.loads(line).get("model_name_or_path") or "").split("__", 1)[0]
                    model = models.get(short, short or None)
                    break
            paths = sorted(p for p in names if p.startswith(run_dir + "/") and p.endswith(".traj"))
            cc.add_traj_files(out, paths, ".traj", sweagent0.convert, f"swe-agent-{run}", model, lab.get)
    out.report()


if __name__ == "__main__":
    main()
