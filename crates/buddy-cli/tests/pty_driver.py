"""Runs a command on a pseudo-terminal and answers its questions, for the buddy tests.

argv[1]: JSON list of [expected text, answer] pairs, taken in order; argv[2:]: the
command. Each answer is typed once its text has appeared in the output since the
previous answer. Prints everything the command wrote; exits with its exit code.
Bounded: 60 s overall.
"""
import json, os, pty, select, sys, time

steps = json.loads(sys.argv[1])
command = sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(command[0], command)
out = b""
seen_from = 0
deadline = time.time() + 60
while True:
    if steps:
        expected, answer = steps[0]
        at = out.find(expected.encode(), seen_from)
        if at >= 0:
            seen_from = at + len(expected)
            os.write(fd, answer.encode())
            steps.pop(0)
            continue
    if time.time() > deadline:
        os.kill(pid, 9)
        sys.stdout.write(out.decode(errors="replace"))
        sys.stdout.write("\n[pty_driver: timed out waiting for %r]\n" % (steps[0][0] if steps else "exit"))
        sys.exit(99)
    ready, _, _ = select.select([fd], [], [], 0.2)
    if ready:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
if steps:
    sys.stdout.write("\n[pty_driver: never asked %r]\n" % steps[0][0])
    sys.exit(98)
sys.exit(os.waitstatus_to_exitcode(status))
