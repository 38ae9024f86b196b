#!/usr/bin/env python3
"""BENCHMARKS §3, issue 59 item 6: three instances on one PostgreSQL, one killed.

    python3 scripts/bench_kill_instance.py BUDDY [--clients 24] [--seconds 30]
        [--latency-ms 200] [--json]

Starts a throw-away PostgreSQL (scripts/postgres.sh), a `buddy mock-server` (the scripted
model, every call answered after --latency-ms) and three `buddy serve` instances on it,
all on 127.0.0.1. --clients threads each run chats (`POST /v1/chat`, one turn of three
tool rounds, `scenarios/three_rounds.json`) one after another for --seconds, spread over
the live instances in turn. Halfway, instance 0 is killed with SIGKILL. Then:

- a turn is *acknowledged* when its client read its `conversation` event (the turn's
  opening is written before it is sent); a client refused by the dead instance before
  that tries the next instance (not a turn: nothing was opened);
- a turn whose stream broke after it was acknowledged is reattached through a live
  instance (`GET /v1/turns/{id}/events?after=N`); what that answered is counted;
- every acknowledged turn is looked up in the database at the end: *lost* is one that
  is not there, or not finished (completed by its client but recorded otherwise counts
  as lost too);
- the dead instance's leases (its rows in `buddy_running_turns`: conversations and key
  slots it held), its spend holds (`buddy_spend_holds`) and its unfinished turns are
  watched until none is left, and how long after the kill that took is printed.

Bounded: the load runs --seconds, reattaching and the wait for the release at most
--release-within seconds (90), every request has a timeout. Loopback only.
"""

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def start(args, cwd):
    """Starts `args` and returns (process, the http:// address it prints on stderr)."""
    proc = subprocess.Popen(args, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    url = next((w for w in line.split() if w.startswith("http://")), None)
    if url is None:
        proc.kill()
        raise SystemExit(f"{' '.join(args)} said: {line!r}")
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, url.rstrip("/")


def sse(response):
    """The (id, event, data) frames of an SSE response, as they come."""
    frame = {}
    data = []
    while True:
        raw = response.readline()
        if not raw:
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if data or frame:
                yield frame.get("id"), frame.get("event", "message"), "\n".join(data)
            frame, data = {}, []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            else:
                frame[field] = value


def connect(url, timeout):
    parts = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)


class Load:
    def __init__(self, urls, seconds, kill_at, timeout):
        self.urls = urls
        self.dead = set()
        self.seconds = seconds
        self.kill_at = kill_at
        self.timeout = timeout
        self.lock = threading.Lock()
        self.turns = []  # dicts, one per acknowledged turn
        self.refused = 0  # requests refused before a turn opened (dead instance)
        self.other_errors = []
        self.next = 0
        self.stop = False

    def pick(self):
        with self.lock:
            live = [i for i in range(len(self.urls)) if i not in self.dead]
            self.next += 1
            return live[self.next % len(live)]

    def chat(self):
        instance = self.pick()
        began = time.monotonic()
        turn = {"instance": instance, "began": began, "state": "opening"}
        try:
            conn = connect(self.urls[instance], self.timeout)
            body = json.dumps({"message": "Check the time, the workspace and the mentions of buddy."})
            conn.request("POST", "/v1/chat", body, {"content-type": "application/json"})
            response = conn.getresponse()
            if response.status != 200:
                with self.lock:
                    self.other_errors.append(f"HTTP {response.status} from instance {instance}")
                conn.close()
                return
            for seq, event, data in sse(response):
                if seq is not None:
                    turn["last_seq"] = int(seq)
                if event == "conversation" and turn["state"] == "opening":
                    opened = json.loads(data)
                    turn.update(state="running", turn_id=opened.get("turn_id"),
                                conversation_id=opened.get("conversation_id"))
                    with self.lock:
                        self.turns.append(turn)
                elif event == "done":
                    turn["state"] = "completed"
                    turn["reason"] = json.loads(data).get("reason")
                    turn["done_ms"] = (time.monotonic() - began) * 1000
                    break
                elif event == "error":
                    turn["state"] = "error"
                    break
            conn.close()
            if turn["state"] == "running":
                turn["state"] = "broken"
        except (OSError, http.client.HTTPException) as e:
            if turn["state"] == "opening":
                with self.lock:
                    self.refused += 1
            else:
                turn["state"] = "broken"
                turn["break"] = str(e)

    def client(self):
        while not self.stop:
            self.chat()


def reattach(url, turn, timeout):
    """What reattaching to `turn` through `url` answered: 'ended' (its events to the end),
    'interrupted' (told its instance went away) or 'gone' (404: the instance died with its
    events)."""
    conn = connect(url, timeout)
    conn.request("GET", f"/v1/turns/{turn['turn_id']}/events?after={turn.get('last_seq', 0)}")
    response = conn.getresponse()
    if response.status == 404:
        conn.close()
        return "gone"
    if response.status != 200:
        conn.close()
        return f"HTTP {response.status}"
    answer = "cut"
    for _, event, _ in sse(response):
        if event == "done":
            answer = "ended"
            break
        if event == "interrupted":
            answer = "interrupted"
            break
    conn.close()
    return answer


def percentile(values, p):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))], 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("buddy")
    parser.add_argument("--clients", type=int, default=24)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--release-within", type=float, default=90)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    buddy = os.path.abspath(args.buddy)

    env = subprocess.run(["bash", os.path.join(HERE, "postgres.sh")], check=True,
                         capture_output=True, text=True).stdout
    pg = dict(line.split(" ", 1)[1].split("=", 1) for line in env.splitlines() if line.startswith("export "))
    url, pgdir = pg["BUDDY_TEST_POSTGRES_URL"], pg["BUDDY_TEST_POSTGRES_DIR"]
    procs = []
    work = tempfile.mkdtemp(prefix="buddy-kill-")
    try:
        psql_bin = os.path.join(open(os.path.join(pgdir, "bin")).read().strip(), "psql")
        as_user = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []

        def sql(query):
            out = subprocess.run(as_user + [psql_bin, "-q", "-X", "-At", url, "-c", query],
                                 check=True, capture_output=True, text=True).stdout
            return [row.split("|") for row in out.splitlines() if row]

        os.makedirs(os.path.join(work, "sandbox"))
        with open(os.path.join(work, "sandbox", "notes.md"), "w") as f:
            f.write("buddy keeps every turn short.\n")
        mock, mock_url = start([buddy, "mock-server", "--listen", "127.0.0.1:0", "--latency-ms",
                                str(args.latency_ms), "--scenarios", os.path.join(ROOT, "scenarios")], work)
        procs.append(mock)
        with open(os.path.join(work, "buddy.toml"), "w") as f:
            f.write(f"""default_provider = "mock"
[providers.mock]
kind = "openai"
base_url = "{mock_url}"
model = "scripted:three_rounds"
[providers.mock.http]
max_retries = 0
http2_prior_knowledge = true
[providers.mock.prices]
"scripted:*" = {{ input = 1.0, output = 2.0 }}
[policy]
max_turn_cost_usd = 0.01
[skills]
sandbox = "sandbox"
[server]
max_concurrent_turns_per_key = 1000000
max_model_calls_in_flight_per_key = 1000000
max_connections_per_address = 1000000
max_daily_cost_usd = 100000
""")
        urls = []
        for _ in range(3):
            serve, serve_url = start([buddy, "--config", "buddy.toml", "serve", "--listen",
                                      "127.0.0.1:0", "--store", url], work)
            procs.append(serve)
            urls.append(serve_url)
        time.sleep(0.3)

        began = time.monotonic()
        load = Load(urls, args.seconds, began + args.seconds / 2, timeout=60)
        threads = [threading.Thread(target=load.client, daemon=True) for _ in range(args.clients)]
        for t in threads:
            t.start()
        time.sleep(args.seconds / 2)
        victim = procs[1]
        # The dead instance's id: any turn it opened names it.
        with load.lock:
            its_turns = [t["turn_id"] for t in load.turns if t["instance"] == 0]
        os.kill(victim.pid, signal.SIGKILL)
        killed = time.monotonic()
        load.kill_at = killed
        with load.lock:
            load.dead.add(0)
        victim.wait()
        dead_instance = None
        if its_turns:
            rows = sql(f"SELECT instance FROM buddy_turns WHERE id = '{its_turns[0]}'")
            dead_instance = rows[0][0] if rows else None
        # The dead instance's leases, holds and unfinished turns, watched from the kill
        # until none is left.
        released = {}
        held = {}

        def watch():
            deadline = killed + args.release_within
            while dead_instance and time.monotonic() < deadline:
                (leases, holds, unfinished), = sql(
                    f"SELECT (SELECT COUNT(*) FROM buddy_running_turns WHERE instance = '{dead_instance}'),"
                    f" (SELECT COUNT(*) FROM buddy_spend_holds WHERE instance = '{dead_instance}'),"
                    f" (SELECT COUNT(*) FROM buddy_turns WHERE instance = '{dead_instance}' AND finished_at_ms IS NULL)")
                now = round(time.monotonic() - killed, 1)
                if not held:
                    held.update(secs_after_kill=now, leases=int(leases), holds=int(holds),
                                unfinished_turns=int(unfinished))
                for name, left in (("leases", leases), ("holds", holds), ("unfinished_turns", unfinished)):
                    if int(left) == 0:
                        released.setdefault(name, now)
                if len(released) == 3:
                    return
                time.sleep(0.5)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        time.sleep(max(0.0, began + args.seconds - time.monotonic()))
        load.stop = True
        for t in threads:
            t.join(timeout=60)
        ended = time.monotonic()

        # Reattach every acknowledged turn whose stream broke, through a live instance.
        broken = [t for t in load.turns if t["state"] == "broken"]
        answers = {}

        def reattach_one(i, turn):
            try:
                answer = reattach(urls[1 + i % 2], turn, timeout=30)
            except (OSError, http.client.HTTPException) as e:
                answer = f"failed: {e}"
            turn["reattached"] = answer
            with load.lock:
                answers[answer] = answers.get(answer, 0) + 1

        reattaching = [threading.Thread(target=reattach_one, args=(i, t)) for i, t in enumerate(broken)]
        for t in reattaching:
            t.start()
        for t in reattaching:
            t.join(timeout=60)
        watcher.join(timeout=args.release_within)

        # Every acknowledged turn, in the database.
        ids = [t["turn_id"] for t in load.turns]
        recorded = {}
        for start_at in range(0, len(ids), 500):
            chunk = ",".join(f"'{i}'" for i in ids[start_at:start_at + 500])
            for turn_id, reason, finished in sql(
                    f"SELECT id, COALESCE(stop_reason, ''), finished_at_ms IS NOT NULL FROM buddy_turns WHERE id IN ({chunk})"):
                recorded[turn_id] = (reason, finished == "t")
        lost = []
        for t in load.turns:
            reason, finished = recorded.get(t["turn_id"], (None, False))
            if reason is None or not finished or (t["state"] == "completed" and reason != "completed"):
                lost.append({"turn_id": t["turn_id"], "client": t["state"], "recorded": reason})

        def done_ms(before):
            return [t["done_ms"] for t in load.turns if t["state"] == "completed"
                    and ((t["began"] < killed) == before)]

        before, after = done_ms(True), done_ms(False)
        report = {
            "instances": 3,
            "clients": args.clients,
            "seconds": args.seconds,
            "latency_ms": args.latency_ms,
            "acknowledged": len(load.turns),
            "completed": sum(t["state"] == "completed" for t in load.turns),
            "errors_after_ack": sum(t["state"] == "error" for t in load.turns),
            "broken_by_the_kill": len(broken),
            "reattached": answers,
            "refused_before_opening": load.refused,
            "other_errors": load.other_errors[:5],
            "lost": len(lost),
            "lost_turns": lost[:10],
            "done_p50_ms_before": percentile(before, 50),
            "done_p99_ms_before": percentile(before, 99),
            "done_p50_ms_after": percentile(after, 50),
            "done_p99_ms_after": percentile(after, 99),
            "turns_per_sec_before": round(len(before) / (killed - began), 1),
            "turns_per_sec_after": round(len(after) / max(0.001, ended - killed), 1),
            "broken_recorded_as": sorted({recorded.get(t["turn_id"], ("absent",))[0] for t in broken}),
            "dead_instance": dead_instance,
            "dead_instance_held_at_first_look": held,
            "released_secs_after_kill": released,
        }
        if args.json:
            print(json.dumps(report))
        else:
            for key, value in report.items():
                print(f"{key}: {value}")
        return 1 if lost else 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        subprocess.run(["bash", os.path.join(HERE, "postgres.sh"), "stop", pgdir], check=False)
        subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    sys.exit(main())
