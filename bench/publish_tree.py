#!/usr/bin/env python3
"""Helpers for bench/publish-vs-resync-build.sh (Python 3.6+, standard library only).

    publish_tree.py gen N DIR
        Write a deterministic tree of N small files under DIR (must not exist
        or be empty) and print one JSON line {"files", "bytes", "dirs"}.

    publish_tree.py harness [--repeat R] [--repeat-max S] [--timeout S] [--ok 0,1]
                            [--err FILE] [--stdout FILE] [--fresh DIR]...
                            [--drop-caches] -- CMD...
        fork+exec CMD up to R times (default 1), wall time around fork..wait4,
        and print one JSON line {"rc", "runs", "seconds_best",
        "seconds_median", "seconds_all", "maxrss_kib", "stderr_head"}. With
        --repeat-max S, runs after the first happen only if the first took at
        most S seconds ("best of R where affordable"). With --timeout S a run
        is killed (SIGKILL) after S seconds: then {"rc": -9, "timed_out": true,
        "timeout": S, ...} is printed and the exit status is 3. Before each run (not
        timed) every --fresh DIR is removed and re-created empty, and with
        --drop-caches the page cache is dropped (sync; echo 3 >
        /proc/sys/vm/drop_caches; needs root). CMD's stdout goes to /dev/null,
        or to --stdout FILE (overwritten by each run, so the last run's is
        kept); its stderr to --err FILE. Exit 1 (and {"rc": N}) if CMD exits
        with a code not in --ok. Run it as `python -I -S` so that the fork copy
        counted in ru_maxrss stays small (only os/sys/time are imported before
        the runs).

    publish_tree.py count-md5 FILE...
        Print the number of "md5:" occurrences and of <loc> elements in FILEs
        as one JSON line {"md5", "loc", "files"}.

Tree layout (byte-for-byte reproducible for a given N; mtimes are not set):

    100 directories (or N if fewer files), directory j:
        "dNN"                          usually
        "dNN with space"               j % 10 == 3
        "dNN-répertoire-ü"             j % 10 == 7
        "dNN/nested/deeper"            j % 20 == 19 (two levels down)
    file i goes into directory i % 100, named
        "file NNNNNN with spaces.txt"  i % 17 == 0
        "fïlé-NNNNNN-日本語.txt"         i % 23 == 0 (and not the above)
        "NNNNNN ü é.dat"               i % 29 == 0 (and neither above)
        "fNNNNNN.txt"                  otherwise
    size_i  = 100 + (splitmix64(i) % 3997)       (100 .. 4096 bytes)
    content = b"resourcesync bench file NNNNNN\\n" followed by bytes of a
              fixed 8 KiB printable block starting at offset (i * 131) % 4096,
              truncated to size_i bytes in total.
"""

import os
import sys
import time

NDIRS = 100


def _splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31)


def _dir_name(j):
    if j % 20 == 19:
        return os.path.join("d%02d" % j, "nested", "deeper")
    if j % 10 == 3:
        return "d%02d with space" % j
    if j % 10 == 7:
        return "d%02d-r\u00e9pertoire-\u00fc" % j
    return "d%02d" % j


def _file_name(i):
    if i % 17 == 0:
        return "file %06d with spaces.txt" % i
    if i % 23 == 0:
        return "f\u00efl\u00e9-%06d-\u65e5\u672c\u8a9e.txt" % i
    if i % 29 == 0:
        return "%06d \u00fc \u00e9.dat" % i
    return "f%06d.txt" % i


def gen(n, root):
    import json
    # a fixed printable block: 64 chars from a 64-symbol alphabet per line
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 ."
    block = bytearray()
    k = 0
    while len(block) < 8192:
        v = _splitmix64(1_000_000 + k)
        for s in range(0, 60, 6):
            block.append(alphabet[(v >> s) & 63])
        if len(block) % 64 >= 60:
            block.append(10)  # newline now and then
        k += 1
    block = bytes(block[:8192])
    os.makedirs(root, exist_ok=True)
    ndirs = min(NDIRS, n)
    dirs = []
    for j in range(ndirs):
        d = os.path.join(root, _dir_name(j))
        os.makedirs(d, exist_ok=True)
        dirs.append(d)
    total = 0
    for i in range(n):
        size = 100 + _splitmix64(i) % 3997
        head = b"resourcesync bench file %06d\n" % i
        off = (i * 131) % 4096
        data = head + block[off:off + size - len(head)]
        with open(os.path.join(dirs[i % ndirs], _file_name(i)), "wb") as f:
            f.write(data)
        total += len(data)
    print(json.dumps({"files": n, "bytes": total, "dirs": ndirs}))


def harness(argv):
    repeat, ok_codes, errfile, outfile, fresh, drop = 1, [0], "/dev/null", "/dev/null", [], False
    repeat_max, timeout = None, None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a == "--drop-caches":
            drop = True
            i += 1
            continue
        v = argv[i + 1]
        if a == "--repeat":
            repeat = int(v)
        elif a == "--repeat-max":
            repeat_max = float(v)
        elif a == "--timeout":
            timeout = int(v)
        elif a == "--ok":
            ok_codes = [int(c) for c in v.split(",")]
        elif a == "--err":
            errfile = v
        elif a == "--stdout":
            outfile = v
        elif a == "--fresh":
            fresh.append(v)
        else:
            sys.exit("harness: unknown option %s" % a)
        i += 2
    cmd = argv[i:]
    if not cmd:
        sys.exit("harness: no command")
    times = []
    maxrss = 0
    rc = 0
    timed_out = False
    child = [0]
    if timeout:
        import signal

        def on_alarm(signum, frame):
            if child[0]:
                os.kill(child[0], signal.SIGKILL)
        signal.signal(signal.SIGALRM, on_alarm)
    for k in range(repeat):
        if k == 1 and repeat_max is not None and times[0] > repeat_max:
            break
        for d in fresh:
            if os.path.lexists(d):
                import shutil
                shutil.rmtree(d)
            os.makedirs(d)
        if drop:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            try:
                fd = os.open(outfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                fd = os.open(errfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 2)
                os.execvp(cmd[0], cmd)
            except BaseException as e:
                os.write(2, ("cannot run %s: %s\n" % (cmd[0], e)).encode())
            os._exit(127)
        child[0] = pid
        if timeout:
            signal.alarm(timeout)
        p, status, ru = os.wait4(pid, 0)  # retried on EINTR (PEP 475)
        t1 = time.perf_counter()
        if timeout:
            signal.alarm(0)
            if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL and t1 - t0 >= timeout:
                timed_out = True
        child[0] = 0
        rc = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else (
            os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status))
        if timed_out:
            sys.stderr.write("command timed out after %d s: %s\n" % (timeout, " ".join(cmd)))
            print('{"rc": %d, "timed_out": true, "timeout": %d, "runs": 0, "maxrss_kib": %d}'
                  % (rc, timeout, max(maxrss, ru.ru_maxrss)))
            sys.exit(3)
        if rc not in ok_codes:
            sys.stderr.write("command failed with exit code %d: %s\n" % (rc, " ".join(cmd)))
            try:
                with open(errfile, "rb") as f:
                    sys.stderr.write(f.read()[-4000:].decode("utf-8", "replace") + "\n")
            except OSError:
                pass
            print('{"rc": %d}' % rc)
            sys.exit(1)
        times.append(t1 - t0)
        if ru.ru_maxrss > maxrss:
            maxrss = ru.ru_maxrss
    import json  # only now: keeps the process small while it forks
    all_times = list(times)
    times.sort()
    m = len(times)
    median = times[m // 2] if m % 2 else (times[m // 2 - 1] + times[m // 2]) / 2
    err_head = ""
    if errfile != "/dev/null":
        with open(errfile, "rb") as f:
            err_head = f.read(2000).decode("utf-8", "replace")
    print(json.dumps({"rc": rc, "runs": m, "seconds_best": round(times[0], 6),
                      "seconds_median": round(median, 6),
                      "seconds_all": [round(t, 6) for t in all_times],
                      "maxrss_kib": maxrss, "stderr_head": err_head}))


def count_md5(paths):
    import json
    md5 = loc = 0
    for p in paths:
        with open(p, "rb") as f:
            data = f.read()
        md5 += data.count(b"md5:")
        loc += data.count(b"<loc>")
    print(json.dumps({"md5": md5, "loc": loc, "files": len(paths)}))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "gen" and len(rest) == 2:
        gen(int(rest[0]), rest[1])
    elif cmd == "harness":
        harness(rest)
    elif cmd == "count-md5":
        count_md5(rest)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
