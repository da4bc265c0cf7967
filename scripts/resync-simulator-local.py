#!/usr/bin/env python3
"""Run resync-simulator (the Python reference Source, 1.1.0) on 127.0.0.1 only, under control.

Usage (with the peers venv's Python, see scripts/python-peers.sh):

    .venv-peers/bin/python scripts/resync-simulator-local.py \
        [--wait-for-go] [--seed N] [--port P] -- SIMULATOR-ARGS...

SIMULATOR-ARGS go to resync-simulator itself (e.g. --config-file C --log-config L); --port and
--base-uri are supplied by this wrapper and must not be given there.

What the wrapper changes, and why:

- Loopback only. resync-simulator calls `HTTPServer.listen(port)`, which binds every interface
  and has no option to do otherwise. The wrapper binds 127.0.0.1:P itself (P = 0: the kernel
  picks a free port, so there is no race), passes `--port P --base-uri http://127.0.0.1:P` so
  every URI in the documents names that socket, and replaces `listen` with `add_sockets` of that
  socket.
- Readiness on stdout: `READY http://127.0.0.1:P` (one line, flushed) once the HTTP server has
  its socket, `STARTED` when the change simulation starts, and
  `FINISHED events=E resources=R changes=C` when it has made `max_events` changes (config). The
  simulator's logging goes wherever the --log-config sends it (use stderr).
- It stops changing but keeps serving, by design rather than by accident. Once `max_events` is
  reached the stock script calls `http_interface.stop()`, which (tornado 6.5.10) stops the main
  thread's IOLoop, not the HTTP thread's: the stock process logs "Stopping HTTP Interface" and
  goes on serving (checked on 127.0.0.1). The wrapper blocks the main thread instead, so that a
  Destination can sync and audit a Source that holds still.
- --wait-for-go: the simulation (the first change) waits for a line `go` on stdin, so a client
  can take a baseline before any change exists (the simulator's /changelist.xml answers 500
  until its first change: it reads `resources[0]` of an empty list).
- stdin end of file (the controlling process exited or closed the pipe) ends the process at
  once: no orphaned simulator. Also SIGTERM/SIGKILL, as usual.
- No autoreload (the simulator's debug=True turns it on; a reload would re-execute the stock
  simulator, bound to every interface).
- --seed N seeds `random` (which resources change, how: reproducible runs).
- One lock around every change and every response that reads the repository (unless
  --no-lock). Stock resync-simulator changes its in-memory repository from the simulation thread
  while the HTTP thread reads it, with no synchronisation, which gives three races:
  (1) the Resource List handler builds the list, *then* stamps `at` = now
      (simulator/http.py ResourceListHandler.generate_resource_list: `generate()` then
      `md_at = 'now'`), so a change made in between is neither in the list nor after its `at`:
      a Destination that (correctly) takes the changes after `at` from the Change List misses it
      for good;
  (2) iterating the repository dict while a change resizes it raises "dictionary changed size
      during iteration" (a 500);
  (3) a resource GET reads its length/ETag, then its payload (ResourceHandler.get): an update in
      between serves headers and a body that disagree.
  With the lock each response sees one state of the Source, as a real Source's would.

Exit: 0 on stdin EOF; 2 on bad arguments; the simulator's own errors as a traceback.
"""

import argparse
import os
import random
import runpy
import socket
import sys
import threading


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    ap.add_argument("--seed", type=int, default=None, help="seed for random")
    ap.add_argument("--wait-for-go", action="store_true",
                    help="start changing only after a line 'go' on stdin")
    ap.add_argument("--no-lock", action="store_true",
                    help="stock behaviour: no lock between changes and responses")
    ap.add_argument("rest", nargs=argparse.REMAINDER,
                    help="arguments for resync-simulator (after --)")
    a = ap.parse_args()
    rest = a.rest[1:] if a.rest[:1] == ["--"] else a.rest
    for r in rest:
        if r in ("--port", "-p", "--base-uri", "-b") or r.startswith(("--port=", "--base-uri=")):
            ap.error("%s is set by this wrapper" % r)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", a.port))
    sock.listen(128)
    sock.setblocking(False)
    port = sock.getsockname()[1]
    base = "http://127.0.0.1:%d" % port

    if a.seed is not None:
        random.seed(a.seed)

    def say(line):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    go = threading.Event()

    def stdin_watch():
        # 'go' releases the simulation; EOF ends the process (the controller is gone).
        for line in sys.stdin:
            if line.strip() == "go":
                go.set()
        os._exit(0)

    threading.Thread(target=stdin_watch, name="stdin", daemon=True).start()

    import tornado.httpserver
    import simulator.source

    def listen(self, port=None, address=None, **kwargs):
        self.add_sockets([sock])
        say("READY " + base)

    tornado.httpserver.HTTPServer.listen = listen

    # The simulator runs its Application with debug=True, which turns on tornado's autoreload: on
    # a change to any imported module it re-executes sys.argv, i.e. the stock resync-simulator,
    # which binds every interface. Not here: no reloading.
    import tornado.autoreload

    tornado.autoreload.start = lambda *args, **kwargs: None

    if not a.no_lock:
        import simulator.http

        lock = threading.RLock()

        def locked(f):
            def g(*args, **kwargs):
                with lock:
                    return f(*args, **kwargs)
            return g

        for name in ("_create_resource", "_update_resource", "_delete_resource"):
            setattr(simulator.source.Source, name, locked(getattr(simulator.source.Source, name)))
        for cls in (simulator.http.ResourceHandler, simulator.http.ResourceListHandler,
                    simulator.http.DynamicChangeListHandler):
            cls.get = locked(cls.get)

    original = simulator.source.Source.simulate_changes

    def simulate_changes(self):
        if a.wait_for_go:
            go.wait()
        say("STARTED")
        original(self)
        changes = self.changememory.change_count if self.has_changememory else 0
        say("FINISHED events=%d resources=%d changes=%d"
            % (self.no_events, self.resource_count, changes))
        threading.Event().wait()  # keep serving until killed or stdin EOF

    simulator.source.Source.simulate_changes = simulate_changes

    script = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "resync-simulator")
    if not os.path.isfile(script):
        sys.exit("error: %s not found: run this with the peers venv's python "
                 "(scripts/python-peers.sh)" % script)
    sys.argv = [script, "--port", str(port), "--base-uri", base] + rest
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
