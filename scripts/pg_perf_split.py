"""Splits `perf script -F ip,sym` samples of PostgreSQL backends by what each was doing:
the first phase (in the order below) any function on the sample's stack belongs to.
Used by scripts/profile-postgres.sh (BENCHMARKS §3).

Reads the samples on stdin; prints one line per phase: samples and share.
"""
import collections
import re
import sys

# Phase, and the PostgreSQL functions that mark it (their names in the 15 sources).
PHASES = [
    ("commit: WAL flush and the transaction's end",
     r"XLogFlush|XLogWrite|RecordTransactionCommit|CommitTransaction\b|AtEOXact|"
     r"ProcArrayEndTransaction|issue_xlog_fsync"),
    ("NOTIFY / LISTEN", r"Async_|ProcessNotifyInterrupt|asyncQueue|PreCommit_Notify|AtCommit_Notify"),
    ("planning", r"pg_plan_queries|pg_plan_query|planner|standard_planner|GetCachedPlan|BuildCachedPlan"),
    ("parse and analysis", r"exec_parse_message|pg_analyze|parse_analyze|raw_parser|pg_parse_query|pg_rewrite"),
    ("execution: WAL records of the rows", r"XLogInsert|XLogRegister"),
    ("execution: indexes", r"btinsert|_bt_|index_insert|ExecInsertIndexTuples"),
    ("execution: foreign-key and other triggers", r"RI_|AfterTrigger|ExecARInsertTriggers"),
    ("execution: the rest", r"ExecutorRun|standard_ExecutorRun|PortalRun|ExecutePlan|ExecutorStart|ExecutorEnd|ExecInitNode"),
    ("bind (parameters)", r"exec_bind_message|PortalStart|CreatePortal"),
    ("protocol: reading and writing messages, the socket",
     r"pq_getbyte|pq_getmessage|pq_flush|secure_read|secure_write|SocketBackend|ReadCommand|"
     r"pq_recvbuf|pq_putmessage|internal_flush|sock_|tcp_|__sys_sendto|__sys_recvfrom|"
     r"WaitEventSetWait|epoll_wait|do_epoll"),
    ("starting or ending transactions (snapshots, locks)", r"StartTransaction|GetSnapshotData|LockAcquire|LockRelease"),
    ("kernel: scheduling and other", r"^(schedule|__schedule|finish_task_switch|_raw_spin)"),
]


def main():
    compiled = [(name, re.compile(rx)) for name, rx in PHASES]
    counts = collections.Counter()
    total = 0
    frames = []

    def flush():
        nonlocal total
        if not frames:
            return
        total += 1
        for name, rx in compiled:
            if any(rx.search(f) for f in frames):
                counts[name] += 1
                return
        counts["other"] += 1

    for line in sys.stdin:
        line = line.strip()
        if not line:
            flush()
            frames = []
            continue
        parts = line.split(None, 1)
        frames.append(parts[1] if len(parts) > 1 else parts[0])
    flush()
    print(f"samples {total}")
    for name, n in counts.most_common():
        print(f"{n:7d} {100 * n / max(total, 1):5.1f}%  {name}")


if __name__ == "__main__":
    main()
