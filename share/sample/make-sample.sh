#!/bin/sh
# make-sample.sh - build the compressed sample dump files from the plain XML
# source, laid out as Wikimedia publishes them:
#   samplewiki-20260101-pages-articles.xml.bz2              one bz2 stream
#   samplewiki-20260101-pages-articles-multistream.xml.bz2  stream 0 =
#       <mediawiki> + <siteinfo>, then one stream per N pages, last stream =
#       </mediawiki>
#   samplewiki-20260101-pages-articles-multistream-index.txt.bz2
#       lines offset:page_id:title (offset of the page's stream, title as
#       written in the XML, i.e. still escaped)
# Usage: sh make-sample.sh [N]   (N pages per stream, default 3).
# Deterministic: the same XML gives byte-identical files.
set -eu
cd "$(dirname "$0")"
exec python3 - "${1:-3}" <<'PY'
import bz2, re, sys
n = int(sys.argv[1])
base = "samplewiki-20260101-pages-articles"
xml = open(base + ".xml", "rb").read()
first = xml.index(b"  <page>")
last = xml.rindex(b"</mediawiki>")
head, body, tail = xml[:first], xml[first:last], xml[last:]
pages = [p + b"  </page>\n" for p in body.split(b"  </page>\n") if p.strip()]
assert b"".join(pages) == body, "page split does not round-trip"
open(base + ".xml.bz2", "wb").write(bz2.compress(xml, 9))
streams, index, off = [bz2.compress(head, 9)], [], 0
off = len(streams[0])
for i in range(0, len(pages), n):
    group = pages[i:i + n]
    for p in group:
        pid = re.search(rb"<id>(\d+)</id>", p).group(1)
        title = re.search(rb"<title>(.*?)</title>", p).group(1)
        index.append(b"%d:%s:%s\n" % (off, pid, title))
    s = bz2.compress(b"".join(group), 9)
    streams.append(s)
    off += len(s)
streams.append(bz2.compress(tail, 9))
open(base + "-multistream.xml.bz2", "wb").write(b"".join(streams))
open(base + "-multistream-index.txt.bz2", "wb").write(bz2.compress(b"".join(index), 9))
assert bz2.decompress(b"".join(streams)) == xml
print("%s: %d pages, %d streams" % (base, len(pages), len(streams)), file=sys.stderr)
PY
