"""What the corpus converters beside this file (run by assemble.sh) share: reading a repository's
git objects at a commit (no work tree), the command line every converter takes
(--git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl), the JSONL file it writes with the
tallies it reports on stderr, and pieces of conversation several of them build alike.

Every record is one line {"id", "source", "model", "success", "messages"[, "tools"]} ("tools"
only when there are any). On stderr: "<source>: wrote ..." then one line per reason a run was
skipped and per note (e.g. turns left out), then each run file whose blob is absent from the
copy (a snapshot may lack big files).

Imported by the converters as a module from their own directory; they set
sys.dont_write_bytecode first so that no __pycache__ is left beside the scripts.
"""
import argparse
import json
import re
import subprocess
import sys


# --- git objects -------------------------------------------------------------------------------

def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True,
                          stdout=subprocess.PIPE).stdout


def blob_or_none(git_dir, commit, path):
    r = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "blob", f"{commit}:{path}"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return r.stdout if r.returncode == 0 else None


def file_names(git_dir, commit, *under):
    """Paths of every file at commit (ls-tree -r --name-only), or only of those under the given paths."""
    return git(git_dir, "ls-tree", "-r", "--name-only", commit, *(("--",) + under if under else ())) \
        .decode().splitlines()


def has_commit(git_dir, rev):
    return subprocess.run(["git", "--git-dir", git_dir, "cat-file", "-e", f"{rev}^{{commit}}"],
                          stderr=subprocess.DEVNULL).returncode == 0


def read_blobs(git_dir, commit, paths):
    """Yields (path, bytes or None) for paths at commit, using one cat-file --batch process."""
    proc = subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        for p in paths:
            proc.stdin.write(f"{commit}:{p}\n".encode())
            proc.stdin.flush()
            header = proc.stdout.readline().decode().rstrip("\n")
            if header.endswith(" missing") or not header:
                yield p, None
                continue
            size = int(header.split()[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)
            yield p, data
    finally:
        proc.stdin.close()
        proc.wait()


# --- command line and output -------------------------------------------------------------------

def arg_parser():
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    return ap


def tally(counts, key):
    counts[key] = counts.get(key, 0) + 1


class Malformed(Exception):
    pass


# What makes a run file (or one run in it) skipped as malformed rather than stop the converter.
BAD_RUN = (Malformed, ValueError, AttributeError, TypeError)


class Output:
    """The JSONL file a converter writes (a context manager), the run files it reads from the
    commit, and what it reports on stderr."""

    def __init__(self, args):
        self.git_dir, self.commit, self.source = args.git_dir, args.commit, args.source
        self.f = open(args.out, "w", encoding="utf-8")
        self.written = 0
        self.counts = {True: 0, False: 0, None: 0}  # runs by success
        self.skipped = {}  # reason -> runs skipped
        self.notes = {}  # what -> how often (not skips)
        self.absent = []  # run files whose blob the copy lacks

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def run_file(self, path):
        """The blob of a run file at the commit, or None (then it is counted absent)."""
        data = blob_or_none(self.git_dir, self.commit, path)
        if data is None:
            self.absent.append(path)
        return data

    def add(self, rid, model, success, messages, tools=None):
        rec = {"id": rid, "source": self.source, "model": model, "success": success, "messages": messages}
        if tools:
            rec["tools"] = tools
        self.f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self.counts[success] += 1
        self.written += 1

    def skip(self, why):
        tally(self.skipped, why)

    def report(self, head=None, skip_label="", list_absent=True):
        """'<source>: <head>' (by default the runs written by success, skipped and absent), one
        line per skip reason and note, and (list_absent) each absent blob."""
        if head is None:
            c = self.counts
            head = (f"wrote {self.written} runs (solved {c[True]}, unsolved {c[False]}, unknown {c[None]}), "
                    f"skipped {sum(self.skipped.values())}; {len(self.absent)} run files absent from this copy")
        print(f"{self.source}: {head}", file=sys.stderr)
        for why, k in sorted(list(self.skipped.items()) + [(f"note: {k}", v) for k, v in self.notes.items()]):
            print(f"  {skip_label}{k}: {why}", file=sys.stderr)
        if list_absent:
            for p in self.absent:
                print(f"  absent blob: {p}", file=sys.stderr)


def run_dirs(names, suffix):
    """The run directories <run>/ of the paths <run>/trajs/.../*<suffix> among names, sorted."""
    return sorted({p.split("/trajs/", 1)[0] for p in names if "/trajs/" in p and p.endswith(suffix)})


def add_traj_files(out, paths, suffix, convert, run, model, success_of):
    """One record "<run>/<instance>" per run file in paths (the instance is the file name without
    suffix): convert(parsed JSON, out.notes) -> (messages, tools); success_of(instance)."""
    for path in paths:
        data = out.run_file(path)
        if data is None:
            continue
        inst = path.rsplit("/", 1)[-1][:-len(suffix)]
        try:
            msgs, tools = convert(json.loads(data), out.notes)
        except BAD_RUN as e:
            out.skip(f"malformed: {e}")
            continue
        out.add(f"{run}/{inst}", model, success_of(inst), msgs, tools)


def reward_success(r):
    """success of a run from its reward: reward == 1 (None without a reward)."""
    return None if r is None else abs(float(r) - 1.0) < 1e-9


def results_labels(data, false_keys):
    """instance id -> True/False from a SWE-bench-style results.json (bytes or None): False for the
    ids listed under false_keys, then True for "resolved" (a list) or else "resolved_ids"."""
    lab = {}
    if data:
        r = json.loads(data)
        for key in false_keys:
            for i in r.get(key) or []:
                lab[i] = False
        res = r.get("resolved")
        for i in (res if isinstance(res, list) else r.get("resolved_ids") or []):
            lab[i] = True
    return lab


# --- conversation pieces -----------------------------------------------------------------------

def check_assistant(messages):
    """messages, unless no assistant message is among them (Malformed)."""
    if not any(x["role"] == "assistant" for x in messages):
        raise Malformed("no assistant message")
    return messages


def text_of(content):
    """Content as text: a string or None as is, a list of blocks as its "text" blocks joined."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    raise Malformed("content neither text nor blocks")


def flat_text(c):
    """Message content as a string (or None); a list of content blocks is flattened, any other
    value given as JSON."""
    if c is None or isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in c)
    return json.dumps(c, ensure_ascii=False)


def json_args(args):
    """Tool call arguments as a JSON string: a string as is, None as {}."""
    if isinstance(args, str):
        return args
    return json.dumps(args if args is not None else {}, ensure_ascii=False)


def tool_call(cid, name, arguments):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


class CallIds:
    """The ids of a run's tool calls as written: the source's id, or call_<n> (n counts the calls)
    when it has none; an id met again in the run gets a _<n> suffix. Calls not yet answered are
    kept in order as (id in the source, id written)."""

    def __init__(self):
        self.n = 0
        self.pending = []
        self.used = set()

    def new(self, src_id):
        self.n += 1
        cid = src_id or f"call_{self.n}"
        if cid in self.used:
            cid = f"{cid}_{self.n}"
        self.used.add(cid)
        self.pending.append((src_id, cid))
        return cid

    def find(self, src_id):
        """The unanswered call with that source id (None for no id)."""
        return next((p for p in self.pending if src_id and p[0] == src_id), None)

    def first(self):
        return self.pending[0] if self.pending else None

    def answer(self, match):
        """Marks a call from find()/first() answered; returns its id as written."""
        self.pending.remove(match)
        return match[1]


def command_tool(name, description, command_description):
    """A tool spec with one required string parameter "command"."""
    return {"type": "function", "function": {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": {"command": {
            "type": "string", "description": command_description}}, "required": ["command"]}}}


def tools_from_prompt(system):
    """OpenAI tool specs from the '---- BEGIN FUNCTION #n: name ----' blocks of a system prompt
    (OpenHands' prompt-based function calling, SWE-agent's XML function calling): description,
    parameters with type, required, allowed values."""
    specs = []
    for m in re.finditer(r"---- BEGIN FUNCTION #\d+: (\S+) ----\n(.*?)\n---- END FUNCTION #\d+ ----", system or "", re.S):
        name, body = m.group(1), m.group(2)
        desc = body
        params_txt = ""
        if "\nParameters:\n" in body:
            desc, params_txt = body.split("\nParameters:\n", 1)
        desc = re.sub(r"^Description:\s*", "", desc.strip())
        desc = desc.replace("No parameters are required for this function.", "").strip()
        props, required = {}, []
        cur = None
        for line in params_txt.splitlines():
            p = re.match(r"\s*\(\d+\)\s+(\w+)\s+\((\w+),\s*(required|optional)\):\s*(.*)$", line)
            if p:
                cur = p.group(1)
                props[cur] = {"type": p.group(2), "description": p.group(4)}
                if p.group(3) == "required":
                    required.append(cur)
                continue
            e = re.match(r"\s*Allowed values:\s*\[(.*)\]\s*$", line)
            if e and cur:
                props[cur]["enum"] = re.findall(r"`([^`]*)`", e.group(1))
            elif cur and line.strip():
                props[cur]["description"] += "\n" + line.strip()
        params = {"type": "object", "properties": props}
        if required:
            params["required"] = required
        specs.append({"type": "function", "function": {"name": name, "description": desc, "parameters": params}})
    return specs
