#!/usr/bin/env python3
"""Time resync 2.0.1's own parsing of a ResourceSync Resource List.

Usage: bench/resync_parse.py FILE [REPEAT=3] [--mode client|parse]

Run it with the peers venv (scripts/python-peers.sh prints its path):
    "$(scripts/python-peers.sh)/bin/python" bench/resync_parse.py list.xml 3

Modes (both are resync's own code paths, nothing re-implemented here):

  client (default) -- what `resync-sync --baseline/--audit --sitemap FILE`
      does to read the source's list: resync.client.Client().read_resource_list()
      i.e. ResourceList(allow_multifile=True, mapper=Mapper()).read(uri=FILE):
      url_or_file_open() -> Sitemap.parse_xml(fh, resources=ResourceList,
      capability='resourcelist') -> defusedxml ElementTree parse of the whole
      document, then per <url>: Sitemap.resource_from_etree() -> Resource(uri),
      lastmod parsed to a float timestamp (regex + dateutil), <rs:md> attributes
      (length -> int, type, hash split into md5/sha-1/sha-256), and
      ResourceList.add() into a dict keyed by URI with a duplicate check.
      A sitemapindex would also be followed (multifile allowed, as the client).

  parse -- what `resync-sync --parse --sitemap FILE` does:
      Sitemap().parse_xml(url_or_file_open(FILE)) into a plain
      ResourceContainer (a list: no duplicate check, no capability check).

Each run is timed with time.perf_counter() from opening the file to having
touched every parsed entry (count them and sum their lengths, unsorted).
Prints one JSON line:
  {"impl":"resync-2.0.1","entries":N,"bytes":B,"seconds_best":S,
   "seconds_median":M,"runs":R,"mode":...,"length_sum":...,"python":...,
   "maxrss_kib":peak RSS of this process over all runs (KiB)}
"""

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import sys
import time

import resync
from resync.client import Client
from resync.sitemap import Sitemap
from resync.url_or_file_open import url_or_file_open


def run_client(path):
    # Exactly the client's read (Client.read_resource_list), which wraps any
    # error in ClientError.
    rl = Client().read_resource_list(path)
    return rl.resources.values()  # ResourceListDict: uri -> Resource


def run_parse(path):
    # Exactly Client.parse_document() minus its printing.
    container = Sitemap().parse_xml(url_or_file_open(path))
    return container.resources  # list of Resource


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("file")
    ap.add_argument("repeat", nargs="?", type=int, default=3)
    ap.add_argument("--mode", choices=("client", "parse"), default="client")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("REPEAT must be >= 1")
    if not os.path.isfile(args.file):
        ap.error("no such file: %s" % args.file)
    if resync.__version__ != "2.0.1":
        sys.stderr.write("warning: resync %s, expected 2.0.1\n" % resync.__version__)
    # resync's client passes the user's path through; url_or_file_open()
    # prefixes 'file:'. An absolute path keeps that independent of the cwd.
    path = os.path.abspath(args.file)
    fn = run_client if args.mode == "client" else run_parse

    times = []
    entries = length_sum = None
    for _ in range(args.repeat):
        gc.collect()
        t0 = time.perf_counter()
        resources = fn(path)
        n = 0
        total = 0
        for r in resources:
            n += 1
            if r.length is not None:
                total += r.length
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if entries is not None and (n, total) != (entries, length_sum):
            sys.stderr.write("error: runs disagree (%r vs %r)\n"
                             % ((n, total), (entries, length_sum)))
            return 1
        entries, length_sum = n, total
        del resources
    print(json.dumps({
        "impl": "resync-" + resync.__version__,
        "entries": entries,
        "bytes": os.path.getsize(path),
        "seconds_best": round(min(times), 6),
        "seconds_median": round(statistics.median(times), 6),
        "runs": len(times),
        "mode": args.mode,
        "length_sum": length_sum,
        "python": platform.python_version(),
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
