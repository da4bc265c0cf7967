#!/usr/bin/env python3
"""Helpers for bench/sync-vs-resync.sh and bench/destination-scale.sh (Python 3.8+, standard
library only).

    destination_bench.py tree N SIZE DIR
        Write N files of about SIZE bytes (SIZE*3/4 .. SIZE*5/4, mean SIZE, deterministic) as
        DIR/dNN/fNNNNNNN.txt (100 directories); print {"files", "bytes"} as one JSON line.

    destination_bench.py rli N PARTS BASE OUTDIR
        Write a static Source whose Resource List is an index of PARTS parts of N/PARTS entries
        each, every URI under BASE (e.g. http://127.0.0.1:PORT/): OUTDIR/.well-known/resourcesync
        (Source Description) -> OUTDIR/capabilitylist.xml -> OUTDIR/resourcelist-index.xml ->
        OUTDIR/resourcelist-NN.xml. Entries: <loc>BASE/res/NNNNNNN</loc>, a lastmod, an md5 and a
        length (the resources themselves are not written: for --dry-run and audit). Print
        {"entries", "parts", "bytes"}.

    destination_bench.py static-source TREE BASE WWW
        A static Source for the files under TREE with lengths and lastmods only (no digest):
        WWW/data -> TREE (a symlink), and WWW/.well-known/resourcesync -> WWW/capabilitylist.xml
        -> WWW/resourcelist.xml, whose entries are BASE/data/<relative path> with the file's
        length and mtime. Print {"entries", "bytes"}.

    destination_bench.py serve DIR
        Serve DIR over HTTP/1.1 on 127.0.0.1, port chosen by the kernel, one thread per
        connection, no request log; print "http://127.0.0.1:PORT/" (one line, flushed) once
        listening. Runs until killed.

    destination_bench.py summary DIR [--skip NAME]
        {"files", "bytes", "digest"} of the regular files under DIR (NAME directories skipped at
        any depth): digest = sha-256 over the sorted (relative path, sha-256 of content) pairs,
        so two trees with the same files and contents have the same digest.

    destination_bench.py harness REPEAT POLL OK ERRFILE [--fresh DIR]... [--cwd DIR] -- CMD...
        fork+exec CMD REPEAT times: wall time around fork..wait4; before each run (not timed)
        every --fresh DIR is removed and re-created empty. With POLL=1, /proc/PID/status VmHWM
        (the exec'd program's own peak RSS) is polled every 1 ms. CMD's stdout goes to
        ERRFILE.out, its stderr to ERRFILE. Prints one JSON line {"rc", "runs", "seconds_best",
        "seconds_median", "seconds_all", "cpu_all" (user + system seconds of each run, from
        wait4), "user_all", "sys_all" (the same, apart), "maxrss_kib", "vmhwm_kib",
        "stdout_head", "stderr_head"}; exit 1 (and {"rc": N}) if CMD exited with a code not in OK (e.g. 0 or
        0,1). Run it as `python -I -S` so that the fork copy counted in ru_maxrss stays small
        (only os/sys/time are imported before the runs).
"""

import os
import sys
import time


def _harness(argv):
    repeat, poll, ok, errfile = int(argv[0]), argv[1] == "1", argv[2], argv[3]
    ok_codes = [int(c) for c in ok.split(",")]
    rest = argv[4:]
    fresh, cwd = [], None
    while rest and rest[0] != "--":
        if rest[0] == "--fresh":
            fresh.append(rest[1])
        elif rest[0] == "--cwd":
            cwd = rest[1]
        else:
            sys.exit("harness: unknown option %r" % rest[0])
        rest = rest[2:]
    cmd = rest[1:]
    outfile = errfile + ".out"
    times, cpu, maxrss, hwm, rc = [], [], 0, 0, 0

    def vmhwm(pid):
        try:
            with open("/proc/%d/status" % pid, "rb") as f:
                for line in f:
                    if line.startswith(b"VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def rmtree(d):
        if not os.path.lexists(d):
            return
        for root, dirs, files in os.walk(d, topdown=False):
            for n in files:
                os.unlink(os.path.join(root, n))
            for n in dirs:
                p = os.path.join(root, n)
                if os.path.islink(p):
                    os.unlink(p)
                else:
                    os.rmdir(p)
        os.rmdir(d)

    for _ in range(repeat):
        for d in fresh:
            rmtree(d)
            os.makedirs(d)
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            try:
                if cwd:
                    os.chdir(cwd)
                fd = os.open(outfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                fd = os.open(errfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 2)
                os.execvp(cmd[0], cmd)
            except BaseException as e:
                os.write(2, ("cannot run %s: %s\n" % (cmd[0], e)).encode())
            os._exit(127)
        if poll:
            while True:
                p, status, ru = os.wait4(pid, os.WNOHANG)
                if p:
                    break
                h = vmhwm(pid)
                if h > hwm:
                    hwm = h
                time.sleep(0.001)
        else:
            p, status, ru = os.wait4(pid, 0)
        t1 = time.perf_counter()
        rc = os.waitstatus_to_exitcode(status)
        if rc not in ok_codes:
            sys.stderr.write("command failed with exit code %d: %s\n" % (rc, " ".join(cmd)))
            for f in (outfile, errfile):
                with open(f, "rb") as fh:
                    sys.stderr.write(fh.read()[-3000:].decode("utf-8", "replace") + "\n")
            print('{"rc": %d}' % rc)
            sys.exit(1)
        times.append(t1 - t0)
        cpu.append((ru.ru_utime, ru.ru_stime))
        maxrss = max(maxrss, ru.ru_maxrss)
    import json  # only now: keeps the harness small while it forks

    s = sorted(times)
    m = len(s)
    median = s[m // 2] if m % 2 else (s[m // 2 - 1] + s[m // 2]) / 2

    def head(f):
        with open(f, "rb") as fh:
            return fh.read(3000).decode("utf-8", "replace")

    print(json.dumps({"rc": rc, "runs": m, "seconds_best": round(s[0], 6),
                      "seconds_median": round(median, 6),
                      "seconds_all": [round(t, 6) for t in times],
                      "cpu_all": [round(u + s_, 6) for u, s_ in cpu],
                      "user_all": [round(u, 3) for u, _ in cpu],
                      "sys_all": [round(s_, 3) for _, s_ in cpu],
                      "maxrss_kib": maxrss, "vmhwm_kib": hwm,
                      "stdout_head": head(outfile), "stderr_head": head(errfile)}))


def _tree(n, size, d):
    import json

    total = 0
    os.makedirs(d, exist_ok=True)
    block = bytes((33 + (k * 7) % 94) for k in range(8192))
    lo, span = size * 3 // 4, size // 2 + 1
    for i in range(n):
        sub = os.path.join(d, "d%02d" % (i % 100))
        if i < 100:
            os.makedirs(sub, exist_ok=True)
        length = lo + (i * 2654435761) % span
        head = b"resourcesync destination bench %07d\n" % i
        off = (i * 131) % 4096
        body = (head + block[off:off + length])[:length]
        with open(os.path.join(sub, "f%07d.txt" % i), "wb") as f:
            f.write(body)
        total += len(body)
    print(json.dumps({"files": n, "bytes": total}))


def _rli(n, parts, base, out):
    import hashlib
    import json

    if not base.endswith("/"):
        base += "/"
    per = -(-n // parts)
    os.makedirs(os.path.join(out, ".well-known"), exist_ok=True)
    ns = ('xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
          'xmlns:rs="http://www.openarchives.org/rs/terms/"')
    at = "2024-06-01T00:00:00Z"
    with open(os.path.join(out, ".well-known", "resourcesync"), "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<urlset %s>\n'
                '<rs:md capability="description"/>\n'
                '<url><loc>%scapabilitylist.xml</loc><rs:md capability="capabilitylist"/></url>\n'
                '</urlset>\n' % (ns, base))
    with open(os.path.join(out, "capabilitylist.xml"), "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<urlset %s>\n'
                '<rs:ln rel="up" href="%s.well-known/resourcesync"/>\n'
                '<rs:md capability="capabilitylist"/>\n'
                '<url><loc>%sresourcelist-index.xml</loc><rs:md capability="resourcelist"/></url>\n'
                '</urlset>\n' % (ns, base, base))
    total = 0
    with open(os.path.join(out, "resourcelist-index.xml"), "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex %s>\n'
                '<rs:ln rel="up" href="%scapabilitylist.xml"/>\n'
                '<rs:md capability="resourcelist" at="%s" completed="%s"/>\n' % (ns, base, at, at))
        for p in range(parts):
            f.write('<sitemap><loc>%sresourcelist-%02d.xml</loc><rs:md at="%s"/></sitemap>\n'
                    % (base, p, at))
        f.write("</sitemapindex>\n")
    fmt = ('<url><loc>%sres/%%07d</loc><lastmod>2024-01-%%02dT%%02d:%%02d:%%02dZ</lastmod>'
           '<rs:md hash="md5:%%s" length="%%d"/></url>\n' % base)
    md5 = hashlib.md5
    i = 0
    for p in range(parts):
        path = os.path.join(out, "resourcelist-%02d.xml" % p)
        with open(path, "w", buffering=1 << 20) as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n<urlset %s>\n'
                    '<rs:ln rel="up" href="%scapabilitylist.xml"/>\n'
                    '<rs:ln rel="index" href="%sresourcelist-index.xml"/>\n'
                    '<rs:md capability="resourcelist" at="%s" completed="%s"/>\n'
                    % (ns, base, base, at, at))
            buf = []
            for _ in range(per):
                if i >= n:
                    break
                s = i % 86400
                buf.append(fmt % (i, 1 + i // 86400 % 28, s // 3600, s // 60 % 60, s % 60,
                                  md5(b"%d" % i).hexdigest(), 100 + i % 1000))
                i += 1
                if len(buf) >= 4096:
                    f.write("".join(buf))
                    buf.clear()
            f.write("".join(buf))
            f.write("</urlset>\n")
        total += os.path.getsize(path)
    print(json.dumps({"entries": i, "parts": parts, "bytes": total}))


def _static_source(tree, base, www):
    import json
    from urllib.parse import quote

    if not base.endswith("/"):
        base += "/"
    os.makedirs(os.path.join(www, ".well-known"), exist_ok=True)
    link = os.path.join(www, "data")
    if not os.path.lexists(link):
        os.symlink(os.path.abspath(tree), link)
    ns = ('xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
          'xmlns:rs="http://www.openarchives.org/rs/terms/"')
    with open(os.path.join(www, ".well-known", "resourcesync"), "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<urlset %s>\n'
                '<rs:md capability="description"/>\n'
                '<url><loc>%scapabilitylist.xml</loc><rs:md capability="capabilitylist"/></url>\n'
                '</urlset>\n' % (ns, base))
    with open(os.path.join(www, "capabilitylist.xml"), "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<urlset %s>\n'
                '<rs:ln rel="up" href="%s.well-known/resourcesync"/>\n'
                '<rs:md capability="capabilitylist"/>\n'
                '<url><loc>%sresourcelist.xml</loc><rs:md capability="resourcelist"/></url>\n'
                '</urlset>\n' % (ns, base, base))
    entries = []
    for root, dirs, files in os.walk(tree):
        dirs.sort()
        for n in sorted(files):
            p = os.path.join(root, n)
            st = os.stat(p)
            rel = os.path.relpath(p, tree).replace(os.sep, "/")
            entries.append('<url><loc>%sdata/%s</loc><lastmod>%s</lastmod>'
                           '<rs:md length="%d"/></url>\n'
                           % (base, quote(rel), time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                              time.gmtime(st.st_mtime)),
                              st.st_size))
    path = os.path.join(www, "resourcelist.xml")
    with open(path, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<urlset %s>\n'
                '<rs:ln rel="up" href="%scapabilitylist.xml"/>\n'
                '<rs:md capability="resourcelist" at="%s"/>\n'
                % (ns, base, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
        f.write("".join(entries))
        f.write("</urlset>\n")
    print(json.dumps({"entries": len(entries), "bytes": os.path.getsize(path)}))


def _serve(d):
    import functools
    import http.server

    class Handler(http.server.SimpleHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=d))
    sys.stdout.write("http://127.0.0.1:%d/\n" % srv.server_address[1])
    sys.stdout.flush()
    srv.serve_forever()


def _summary(d, skip):
    import hashlib
    import json

    pairs, nbytes = [], 0
    for root, dirs, files in os.walk(d):
        dirs[:] = [x for x in dirs if x not in skip]
        for n in files:
            p = os.path.join(root, n)
            if not os.path.isfile(p) or os.path.islink(p):
                continue
            with open(p, "rb") as f:
                data = f.read()
            nbytes += len(data)
            pairs.append((os.path.relpath(p, d), hashlib.sha256(data).hexdigest()))
    pairs.sort()
    h = hashlib.sha256()
    for rel, dig in pairs:
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + dig.encode() + b"\n")
    print(json.dumps({"files": len(pairs), "bytes": nbytes, "digest": h.hexdigest()}))


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "harness":
        _harness(args)
    elif cmd == "tree" and len(args) == 3:
        _tree(int(args[0]), int(args[1]), args[2])
    elif cmd == "rli" and len(args) == 4:
        _rli(int(args[0]), int(args[1]), args[2], args[3])
    elif cmd == "static-source" and len(args) == 3:
        _static_source(args[0], args[1], args[2])
    elif cmd == "serve" and len(args) == 1:
        _serve(args[0])
    elif cmd == "summary" and args:
        skip = set()
        rest = args[1:]
        while rest[:1] == ["--skip"]:
            skip.add(rest[1])
            rest = rest[2:]
        _summary(args[0], skip)
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
