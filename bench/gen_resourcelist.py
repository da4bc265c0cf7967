#!/usr/bin/env python3
"""Write a deterministic ResourceSync Resource List with N entries.

Usage: bench/gen_resourcelist.py N OUT

Streams the document to OUT (use "-" for stdout) in constant memory; needs
only the Python 3 standard library (3.6+).

Exact format (byte-for-byte reproducible for a given N):

    <?xml version="1.0" encoding="UTF-8"?>
    <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
    <rs:md capability="resourcelist" at="AT"/>
    <rs:ln rel="up" href="http://example.com/capabilitylist.xml"/>
    <url><loc>http://example.com/res/IIIIIII</loc><lastmod>LASTMOD</lastmod><rs:md hash="md5:MD5 sha-256:SHA256" length="LEN" type="text/plain"/></url>
    ...                                  (one <url> line per entry, i = 0 .. N-1)
    </urlset>

Per entry i (0-based):
    IIIIIII  = i zero-padded to at least 7 digits ("%07d")
    content  = ("resource %07d\n" % i) repeated (1 + i % 8) times, UTF-8
    LEN      = len(content) in bytes (17 .. 136 for i < 10,000,000)
    MD5      = hex md5 of content (32 hex digits)
    SHA256   = hex sha-256 of content (64 hex digits)
    LASTMOD  = 2024-01-01T00:00:00Z + 13*i seconds, as YYYY-MM-DDTHH:MM:SSZ
    AT       = 2024-01-01T00:00:00Z + 13*N seconds (not before any lastmod)

So the hashes and lengths are the real digests of a content string that can be
regenerated from the index alone (a test server could serve it).
"""

import hashlib
import sys
import time

SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
RS_NS = "http://www.openarchives.org/rs/terms/"
BASE_EPOCH = 1704067200  # 2024-01-01T00:00:00Z
STEP_SECONDS = 13
CHUNK = 4096  # entries per write() call; keeps memory constant


def w3c(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def content_for(i):
    return (("resource %07d\n" % i) * (1 + i % 8)).encode("utf-8")


def write_list(n, out):
    out.write(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="%s" xmlns:rs="%s">\n'
        '<rs:md capability="resourcelist" at="%s"/>\n'
        '<rs:ln rel="up" href="http://example.com/capabilitylist.xml"/>\n'
        % (SITEMAP_NS, RS_NS, w3c(BASE_EPOCH + STEP_SECONDS * n))
    )
    md5 = hashlib.md5
    sha256 = hashlib.sha256
    fmt = (
        '<url><loc>http://example.com/res/%07d</loc><lastmod>%s</lastmod>'
        '<rs:md hash="md5:%s sha-256:%s" length="%d" type="text/plain"/></url>\n'
    )
    buf = []
    day = None
    day_prefix = ""
    for i in range(n):
        c = (("resource %07d\n" % i) * (1 + i % 8)).encode("utf-8")  # content_for(i)
        # lastmod: w3c(BASE_EPOCH + STEP_SECONDS * i), with the date part
        # cached per day (gmtime/strftime per entry dominates otherwise)
        ts = BASE_EPOCH + STEP_SECONDS * i
        d, sec = divmod(ts, 86400)
        if d != day:
            day = d
            day_prefix = time.strftime("%Y-%m-%dT", time.gmtime(d * 86400))
        lastmod = "%s%02d:%02d:%02dZ" % (day_prefix, sec // 3600, sec // 60 % 60, sec % 60)
        buf.append(fmt % (i, lastmod, md5(c).hexdigest(), sha256(c).hexdigest(), len(c)))
        if len(buf) >= CHUNK:
            out.write("".join(buf))
            buf.clear()
    if buf:
        out.write("".join(buf))
    out.write("</urlset>\n")


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: %s N OUT   (OUT may be '-' for stdout)\n" % argv[0])
        return 2
    try:
        n = int(argv[1])
        if n < 0:
            raise ValueError
    except ValueError:
        sys.stderr.write("error: N must be a non-negative integer, got %r\n" % argv[1])
        return 2
    if argv[2] == "-":
        write_list(n, sys.stdout)
        sys.stdout.flush()
    else:
        # newline="\n": identical bytes on every platform
        with open(argv[2], "w", encoding="utf-8", newline="\n",
                  buffering=1 << 20) as out:
            write_list(n, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
