#!/usr/bin/env python3
"""Converts the SWE-agent runs on SWE-bench-java (Verified, 91 tasks) published in
multi-swe-bench/experiments (the 2024 SWE-bench-java leaderboard) into OpenAI Chat Completions
conversations, one per line.

usage: multi_swe_bench_java_sweagent.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl

Reads git objects only. A run directory is evaluation/<lang>/<split>/<run>/ holding trajs/*.traj
(SWE-agent 0.x trajectories), metadata.yaml ("name: SWE-agent + <model>"), results/results.json
and logs/<instance>/run_instance.log (the SWE-bench-java harness log of that instance).

success: true if the instance is in results.json "resolved", false if it is in "unresolved_ids"
or "empty_patch_ids"; for an instance in none of these lists (results.json of the gpt-4o-mini
run covers only one instance) the harness log's last "Result for <id>: resolved: True|False"
line decides; otherwise null (not evaluated, or an evaluation error).

Messages and tools: the trajectory converted by sweagent0.py (see there): the "history" the model
saw, each text action one tool call; the harness's own exit turns left out (counted on stderr).
"""
import re
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ beside the scripts
import corpus_common as cc  # noqa: E402
import sweagent0  # noqa: E402


def labels(git_dir, commit, run_dir, names):
    """instance id -> True/False from results/results.json, then the per-instance harness logs."""
    lab = cc.results_labels(cc.blob_or_none(git_dir, commit, f"{run_dir}/results/results.json"),
                            ("unresolved_ids", "empty_patch_ids"))
    for p in names:
        if p.startswith(run_dir + "/logs/") and p.endswith("/run_instance.log"):
            inst = p.split("/")[-2]
            if inst in lab:
                continue
            log = cc.blob_or_none(git_dir, commit, p)
            if log is None:
                continue
            m = re.findall(r"Result for (\S+): resolved: (True|False)", log.decode("utf-8", "replace"))
            if m and m[-1][0] == inst:
                lab[inst] = m[-1][1] == "True"
    return lab


def model_of(git_dir, commit, run_dir):
    meta = cc.blob_or_none(git_dir, commit, f"{run_dir}/metadata.yaml")
    if meta:
        m = re.search(r"^name:\s*(.+)$", meta.decode(), re.M)
        if m and "+" in m.group(1):
            return m.group(1).split("+", 1)[1].strip().strip("'\"")
    m = re.match(r"\d{8}_SWE-agent_(.+)$", run_dir.rsplit("/", 1)[-1])
    return m.group(1) if m else None


def main():
    a = cc.arg_parser().parse_args()

    names = cc.file_names(a.git_dir, a.commit, "evaluation")
    runs = sorted({p.rsplit("/trajs/", 1)[0] for p in names if "/trajs/" in p and p.endswith(".traj")})
    with cc.Output(a) as out:
        for run_dir in runs:
            lab = labels(a.git_dir, a.commit, run_dir, names)
            model = model_of(a.git_dir, a.commit, run_dir)
            run = run_dir.rsplit("/", 1)[-1]
            paths = sorted(p for p in names if p.startswith(run_dir + "/trajs/") and p.endswith(".traj"))
            cc.add_traj_files(out, paths, ".traj", sweagent0.convert, run, model, lab.get)
    out.report()


if __name__ == "__main__":
    main()
