"""CPU seconds (user + system) used so far by process trees (bench/aggregate.sh).

Usage: cpu_tree.py PID [PID...]
For each PID and every live descendant: utime + stime + cutime + cstime (children reaped by a
process, such as PostgreSQL's backends or nginx's workers, count in their parent's c*time, so
that a difference of two readings is the CPU used between them). Prints the sum in seconds.
"""
import os
import sys

tick = os.sysconf("SC_CLK_TCK")
stats = {}
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        with open("/proc/%s/stat" % d) as f:
            s = f.read()
    except OSError:
        continue
    # The command may hold spaces and parentheses: fields after the last ')'.
    rest = s[s.rindex(")") + 2:].split()
    ppid = int(rest[1])
    cpu = sum(int(x) for x in rest[11:15])
    stats[int(d)] = (ppid, cpu)
children = {}
for pid, (ppid, _) in stats.items():
    children.setdefault(ppid, []).append(pid)
total, seen = 0, set()
todo = [int(p) for p in sys.argv[1:]]
while todo:
    p = todo.pop()
    if p in seen or p not in stats:
        continue
    seen.add(p)
    total += stats[p][1]
    todo.extend(children.get(p, []))
print("%.2f" % (total / tick))
