"""The OAI-PMH data provider of the tests (started by scripts/oai-provider.sh).

The protocol is the `oaipmh` library's (PyPI `oaipmh`, the maintained fork of pyoai): its
`BatchingServer` parses the requests (verbs, arguments, `from`/`until` datestamps), makes the
resumption tokens, answers the OAI-PMH errors (`badResumptionToken`, `noRecordsMatch`,
`cannotDisseminateFormat`, ...) and writes the XML. This file only holds the records: several
repositories at once, each a dict of records in memory, served at /NAME/oai, and changed while
the server runs through POST /NAME/admin (JSON), so that each test works on its own repository:

    {"reset": {"batch_size": 50, "deleted_record": "persistent"}}  make (or empty) NAME
    {"generate": {"count": 300, "deleted_every": 10, "prefix": "oai:fixture:"}}
    {"put": [{"id": "oai:x:1", "title": "...", "datestamp": "2026-01-01T00:00:00Z"}]}
    {"delete": ["oai:x:1"]}                                      status="deleted" from now on

A record's datestamp is the time of its last change (now, to the second) unless given.
Answers {"records": N}. At start the repository `fixture` holds --records records, every
--deleted-every'th deleted, --batch-size a page.

Usage: python oai_provider.py --port-file FILE [--records 300] [--batch-size 50]
"""

import argparse
import json
import sys
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from oaipmh import common, error
from oaipmh.metadata import MetadataRegistry
from oaipmh.server import BatchingServer, oai_dc_writer

DC_FIELDS = ("title", "creator", "subject", "description", "date", "identifier")


def now():
    return datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)


def parse_date(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ")


class Repository:
    """The data behind one OAI-PMH repository (the library's IBatchingOAI interface)."""

    def __init__(self, name, base_url, batch_size=50, deleted_record="persistent"):
        self.name = name
        self.base_url = base_url
        self.deleted_record = deleted_record
        self.records = {}
        self.lock = threading.Lock()
        registry = MetadataRegistry()
        registry.registerWriter("oai_dc", oai_dc_writer)
        self.server = BatchingServer(
            self, metadata_registry=registry, resumption_batch_size=batch_size
        )

    # -- changes (admin) ----------------------------------------------------------------
    def put(self, rec):
        ident = rec["id"]
        stamp = parse_date(rec["datestamp"]) if rec.get("datestamp") else now()
        fields = {k: [rec[k]] for k in DC_FIELDS if rec.get(k)}
        fields.setdefault("identifier", [ident])
        with self.lock:
            self.records[ident] = {"datestamp": stamp, "deleted": False, "fields": fields}

    def delete(self, ident):
        with self.lock:
            old = self.records.get(ident)
            fields = old["fields"] if old else {"identifier": [ident]}
            self.records[ident] = {"datestamp": now(), "deleted": True, "fields": fields}

    def generate(self, count, deleted_every, prefix):
        stamp = datetime(2020, 1, 1)
        with self.lock:
            for i in range(count):
                ident = f"{prefix}{i:06d}"
                fields = {
                    "title": [f"Record {i} of {self.name}"],
                    "creator": [f"Author {i % 17}"],
                    "description": [f"Description {i}: " + "lorem ipsum " * (i % 5)],
                    "identifier": [ident],
                }
                deleted = deleted_every > 0 and i % deleted_every == deleted_every - 1
                self.records[ident] = {
                    "datestamp": stamp.replace(day=1 + i % 28, hour=i % 24, minute=i % 60),
                    "deleted": deleted,
                    "fields": fields,
                }

    # -- IBatchingOAI ---------------------------------------------------------------------
    def identify(self):
        return common.Identify(
            repositoryName=f"resourcesync test repository {self.name}",
            baseURL=self.base_url,
            protocolVersion="2.0",
            adminEmails=["tests@example.invalid"],
            earliestDatestamp=datetime(2000, 1, 1),
            deletedRecord=self.deleted_record,
            granularity="YYYY-MM-DDThh:mm:ssZ",
            compression=["identity"],
        )

    def listMetadataFormats(self, identifier=None):
        if identifier is not None and identifier not in self.records:
            raise error.IdDoesNotExistError(identifier)
        return [
            (
                "oai_dc",
                "http://www.openarchives.org/OAI/2.0/oai_dc.xsd",
                "http://www.openarchives.org/OAI/2.0/oai_dc/",
            )
        ]

    def listSets(self, cursor=0, batch_size=10):
        raise error.NoSetHierarchyError("this repository has no sets")

    def _selected(self, set=None, from_=None, until=None):
        if set is not None:
            raise error.NoSetHierarchyError("this repository has no sets")
        with self.lock:
            items = sorted(self.records.items(), key=lambda kv: (kv[1]["datestamp"], kv[0]))
        return [
            (ident, r)
            for ident, r in items
            if (from_ is None or r["datestamp"] >= from_)
            and (until is None or r["datestamp"] <= until)
        ]

    @staticmethod
    def _header(ident, r):
        return common.Header(None, ident, r["datestamp"], [], r["deleted"])

    def listIdentifiers(self, metadataPrefix, set=None, from_=None, until=None, cursor=0,
                        batch_size=10):
        sel = self._selected(set, from_, until)[cursor:cursor + batch_size]
        return [self._header(i, r) for i, r in sel]

    def listRecords(self, metadataPrefix, set=None, from_=None, until=None, cursor=0,
                    batch_size=10):
        sel = self._selected(set, from_, until)[cursor:cursor + batch_size]
        return [
            (self._header(i, r), common.Metadata(None, r["fields"]), None) for i, r in sel
        ]

    def getRecord(self, metadataPrefix, identifier):
        with self.lock:
            r = self.records.get(identifier)
        if r is None:
            raise error.IdDoesNotExistError(identifier)
        return self._header(identifier, r), common.Metadata(None, r["fields"]), None


class Provider(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr):
        super().__init__(addr, Handler)
        self.repos = {}
        self.repos_lock = threading.Lock()

    def root(self):
        return f"http://127.0.0.1:{self.server_address[1]}/"

    def repo(self, name, create=False, **kw):
        with self.repos_lock:
            if create:
                self.repos[name] = Repository(name, f"{self.root()}{name}/oai", **kw)
            return self.repos.get(name)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the tests read no log
        pass

    def send(self, status, body, ctype):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def route(self):
        parts = urlsplit(self.path)
        segs = [s for s in parts.path.split("/") if s]
        if len(segs) != 2:
            return None, None, parts
        return segs[0], segs[1], parts

    def oai(self, name, query):
        repo = self.server.repo(name)
        if repo is None:
            return self.send(404, b"no such repository\n", "text/plain")
        args = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        body = repo.server.handleRequest(args)
        self.send(200, body, "text/xml; charset=utf-8")

    def do_GET(self):
        name, what, parts = self.route()
        if what != "oai":
            return self.send(404, b"not found\n", "text/plain")
        self.oai(name, parts.query)

    def do_POST(self):
        name, what, parts = self.route()
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n)
        if what == "oai":  # OAI-PMH 2.0 3.1.1.2: POST with form arguments
            return self.oai(name, data.decode("utf-8"))
        if what != "admin":
            return self.send(404, b"not found\n", "text/plain")
        try:
            cmd = json.loads(data or b"{}")
            if "reset" in cmd or self.server.repo(name) is None:
                self.server.repo(name, create=True, **cmd.get("reset", {}))
            repo = self.server.repo(name)
            if "generate" in cmd:
                g = cmd["generate"]
                repo.generate(g.get("count", 300), g.get("deleted_every", 10),
                              g.get("prefix", f"oai:{name}:"))
            for rec in cmd.get("put", []):
                repo.put(rec)
            for ident in cmd.get("delete", []):
                repo.delete(ident)
            out = json.dumps({"records": len(repo.records)}).encode()
            self.send(200, out, "application/json")
        except Exception as e:  # a test's mistake: said, not fatal to the server
            self.send(400, f"{type(e).__name__}: {e}\n".encode(), "text/plain")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--records", type=int, default=300)
    p.add_argument("--deleted-every", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=50)
    a = p.parse_args()
    srv = Provider(("127.0.0.1", 0))
    fixture = srv.repo("fixture", create=True, batch_size=a.batch_size)
    fixture.generate(a.records, a.deleted_every, "oai:fixture:")
    with open(a.port_file + ".tmp", "w") as f:
        f.write(f"{srv.server_address[1]}\n")
    import os
    os.replace(a.port_file + ".tmp", a.port_file)
    print(f"oai-provider: serving {srv.root()}", file=sys.stderr, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
