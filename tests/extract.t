#!/usr/bin/env bash
# loom-extract: golden outputs of the bundled sample dump in every format,
# from the single-stream and the multistream files with -j 1 and -j 2, and
# every bad input of issue 3.
. "$(dirname "$0")/lib.sh"
command -v loom-extract >/dev/null || skip_all "loom-extract not built"
SAMPLE=$SHARE/sample/samplewiki-20260101-pages-articles
GOLD=$TESTS/golden/extract
SINGLE=$SAMPLE.xml.bz2
MULTI=$SAMPLE-multistream.xml.bz2

fmt_opts() {
	case $1 in
	lines) echo "" ;;
	text) echo "--format text --headings --keep-tables" ;;
	jsonl) echo "--format jsonl --keep-redirects --namespaces 0,4,14" ;;
	doc) echo "--format doc --skip-disambiguation --min-length 50" ;;
	esac
}

# --- golden outputs ---------------------------------------------------------
for f in lines text jsonl doc; do
	for input in "$SINGLE" "$MULTI"; do
		kind=single; [ "$input" = "$MULTI" ] && kind=multistream
		for j in 1 2; do
			# shellcheck disable=SC2046
			run loom-extract -j $j $(fmt_opts $f) "$input"
			is_rc 0 "$f $kind -j $j: exit 0"
			same_file "$out" "$GOLD/sample.$f" "$f $kind -j $j: golden output"
			like "$err" "^loom-extract: 14 pages seen, " "$f $kind -j $j: summary line"
		done
	done
done
like "$err" ", multistream" "the index beside the dump is found automatically"

# plain XML, stdin, gzip
run loom-extract -j 2 "$SAMPLE.xml"
is_rc 0 "plain .xml: exit 0"
same_file "$out" "$GOLD/sample.lines" "plain .xml: golden"
rc=0; loom-extract --format jsonl --keep-redirects -n 0,4,14 < "$SAMPLE.xml" >"$out" 2>"$err" || rc=$?
is_rc 0 "stdin: exit 0"
same_file "$out" "$GOLD/sample.jsonl" "stdin: golden"
gzip -c "$SAMPLE.xml" > "$T/sample.xml.gz"
run loom-extract --format doc --skip-disambiguation --min-length 50 "$T/sample.xml.gz"
same_file "$out" "$GOLD/sample.doc" ".xml.gz: golden"

# the summary counts
run loom-extract -j 2 "$SINGLE"
like "$err" "14 pages seen, 9 articles written, 2 redirects, 2 skipped by namespace, 1 disambiguation, 1 empty or short, 0 without text, .* 0 invalid UTF-8, [0-9.]+ s$" "summary: counts (the disambiguation page counted, kept)"
run loom-extract --skip-disambiguation "$MULTI"
like "$err" "8 articles written, .* 1 disambiguation skipped" "summary: disambiguation skipped"

# many streams (more than the window of in-flight streams): same output for
# any -j, same as reading it as one stream
python3 - "$T/many-multistream.xml.bz2" "$T/many-multistream-index.txt.bz2" <<'PY'
import bz2, sys
head = b'<mediawiki version="0.11">\n  <siteinfo><base>https://m.example/wiki/Main</base></siteinfo>\n'
pages = [('  <page><title>P%d</title><ns>%d</ns><id>%d</id><revision><id>%d</id><text>'
          "Page %d is '''about''' [[topic %d|things]]{{cite|x}}.\n\nSecond paragraph %s.</text>"
          '</revision></page>\n' % (i, 0 if i % 7 else 4, i, 5000 + i, i, i, "x" * (i % 50))).encode()
         for i in range(1, 401)]
streams, index = [bz2.compress(head)], []
off = len(streams[0])
for k in range(0, len(pages), 9):
    for i in range(k, min(k + 9, len(pages))):
        index.append(b"%d:%d:P%d\n" % (off, i + 1, i + 1))
    streams.append(bz2.compress(b"".join(pages[k:k + 9])))
    off += len(streams[-1])
streams.append(bz2.compress(b"</mediawiki>\n"))
open(sys.argv[1], "wb").write(b"".join(streams))
open(sys.argv[2], "wb").write(bz2.compress(b"".join(index)))
PY
run loom-extract -j 1 --no-index "$T/many-multistream.xml.bz2"
cp "$out" "$T/many.ref"
is "$(wc -l < "$T/many.ref")" "343" "many streams: 343 articles in namespace 0"
like "$T/many.ref" "^Page 398 is about things\. Second paragraph x{48}\.$" "many streams: article 398"
is "$(tail -n 1 "$T/many.ref")" "Page 400 is about things. Second paragraph." "many streams: last article"
for j in 1 2 3 8; do
	run loom-extract -j $j "$T/many-multistream.xml.bz2"
	is_rc 0 "many streams -j $j: exit 0"
	same_file "$out" "$T/many.ref" "many streams -j $j: same output as one stream"
	like "$err" "400 pages seen, 343 articles written, .*multistream" "many streams -j $j: summary"
done

# explicit index, --no-index
cp "$MULTI" "$T/renamed.xml.bz2"
run loom-extract --format text --headings --keep-tables "$T/renamed.xml.bz2"
same_file "$out" "$GOLD/sample.text" "multistream read as one stream without index"
unlike "$err" "multistream" "no index beside it: single stream"
run loom-extract -j 2 --format text --headings --keep-tables --index "$SAMPLE-multistream-index.txt.bz2" "$T/renamed.xml.bz2"
same_file "$out" "$GOLD/sample.text" "--index FILE: golden"
like "$err" "multistream" "--index FILE: multistream"
run loom-extract --no-index "$MULTI"
unlike "$err" "multistream" "--no-index: single stream"
same_file "$out" "$GOLD/sample.lines" "--no-index: golden"

# -o FILE (atomic), -z
mkdir "$T/o"
run loom-extract -o "$T/o/sample.txt" "$SINGLE"
is_rc 0 "-o: exit 0"
same_file "$T/o/sample.txt" "$GOLD/sample.lines" "-o: golden"
is "$(wc -c < "$out")" "0" "-o: nothing on stdout"
no_tmp_left "$T/o" "-o: no temporary left"
mkfifo "$T/fifo"
timeout 30 cat "$T/fifo" > "$T/from-fifo" &
run loom-extract -o "$T/fifo" "$SINGLE"
wait
is_rc 0 "-o FIFO: exit 0"
ok "-o FIFO: still a FIFO (written in place, not renamed over)" test -p "$T/fifo"
same_file "$T/from-fifo" "$GOLD/sample.lines" "-o FIFO: golden"
run loom-extract -z "$SINGLE"
is "$(tr -cd '\0' < "$out" | wc -c)" "9" "-z: 9 NUL-terminated articles"
is "$(tr '\0' '\n' < "$out" | cmp - "$GOLD/sample.lines" && echo same)" "same" "-z: same articles"
run loom-extract --format text -z "$SINGLE"
is "$(tr -cd '\0' < "$out" | wc -c)" "9" "--format text -z: 9 articles"

# Japanese text comes through unharmed
run loom-extract --format text "$SINGLE"
like "$out" "^日本では弥生時代に原始的な織機が使われた。豊田佐吉は1924年に無停止杼換式豊田自動織機を完成させた。$" "Japanese paragraph intact"
like "$out" "^織機（しょっき）は、織物を織るための機械である。" "Japanese lead intact (lang template and its comma removed)"
unlike "$out" "ファイル|Category:織物|en:Loom|Jacquard loom.jpg" "Japanese file/category/interlanguage links removed"

# --- usage ------------------------------------------------------------------
run loom-extract --help
is_rc 0 "--help: exit 0"
like "$out" "^usage: loom-extract" "--help: usage on stdout"
run loom-extract --format xml "$SINGLE"
is_rc 2 "bad --format: exit 2"
like "$err" "format: 'xml'" "bad --format: named"
run loom-extract -z --format jsonl "$SINGLE"
is_rc 2 "-z with jsonl: exit 2"
run loom-extract -j 0 "$SINGLE"
is_rc 2 "-j 0: exit 2"
run loom-extract --namespaces 0,x "$SINGLE"
is_rc 2 "bad --namespaces: exit 2"
run loom-extract "$T/missing.xml.bz2"
is_rc 1 "missing dump: exit 1"
like "$err" "cannot open '.*missing.xml.bz2': No such file" "missing dump: named"
run loom-extract --version
like "$out" "libarchive.*expat" "--version names libraries"

# --- bad input ----------------------------------------------------------------
# XML wrapper: mkdump FILE, reading <page> elements on stdin
mkdump() {
	{ printf '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11">\n'
	  printf '  <siteinfo><base>https://t.example/wiki/Main</base></siteinfo>\n'
	  cat
	  printf '</mediawiki>\n'; } > "$1"
}
pg() { # id title text
	printf '  <page><title>%s</title><ns>0</ns><id>%s</id><revision><id>%s</id><text xml:space="preserve">%s</text></revision></page>\n' "$2" "$1" "$((100 + $1))" "$3"
}

# truncated .bz2, multistream with index: the streams before the cut are kept
head -c 4300 "$MULTI" > "$T/cut-multistream.xml.bz2"
cp "$SAMPLE-multistream-index.txt.bz2" "$T/cut-multistream-index.txt.bz2"
mkdir "$T/c"
run loom-extract -j 2 -o "$T/c/out.txt" "$T/cut-multistream.xml.bz2"
is_rc 1 "truncated multistream: exit 1"
like "$err" "cut-multistream.xml.bz2' ends at byte 4300, but index '.*cut-multistream-index.txt.bz2', line [0-9]+ has a stream at byte [0-9]+ \(a truncated file, or not its index\)" \
	"truncated multistream: byte offset and index line named"
like "$err" "output is INCOMPLETE: 4 articles" "truncated multistream: says incomplete"
ok "truncated multistream: FILE untouched" test ! -e "$T/c/out.txt"
head -4 "$GOLD/sample.lines" > "$T/first4"
same_file "$T/c/out.txt.incomplete" "$T/first4" "truncated multistream: articles before the cut kept"
no_tmp_left "$T/c" "truncated multistream: no temporary left"
run loom-extract -j 1 "$T/cut-multistream.xml.bz2"
same_file "$out" "$T/first4" "truncated multistream -j 1: same articles on stdout"

# truncated single-stream .bz2 (bigger than libarchive's read-ahead)
python3 - "$T/big.xml.bz2" <<'PY'
import bz2, sys
pages = "".join('  <page><title>P%d</title><ns>0</ns><id>%d</id><revision><id>%d</id>'
                '<text xml:space="preserve">Article %d. %s</text></revision></page>\n'
                % (i, i, 1000 + i, i, "lorem ipsum dolor " * 200) for i in range(1, 401))
xml = ('<mediawiki version="0.11">\n' + pages + '</mediawiki>\n').encode()
# several bz2 streams, like pbzip2 output, so the head decodes before the cut
out = b"".join(bz2.compress(xml[i:i + 100000]) for i in range(0, len(xml), 100000))
open(sys.argv[1], "wb").write(out[:len(out) * 3 // 4])
PY
run loom-extract -j 2 "$T/big.xml.bz2"
is_rc 1 "truncated .bz2: exit 1"
like "$err" "compressed data ends or is corrupt at byte [0-9]+" "truncated .bz2: byte offset"
like "$err" "INCOMPLETE" "truncated .bz2: says incomplete"
ok "truncated .bz2: the articles before the cut are written" test "$(wc -l < "$out")" -gt 100
like "$out" "^Article 1\. lorem" "truncated .bz2: first article intact"
is "$(grep -vc '^Article [0-9]*\. lorem' "$out")" "0" "truncated .bz2: only whole articles"

# malformed XML: line and column
{ pg 1 A "fine text"; printf '  <page><title>B</titel></page>\n'; } | mkdump "$T/bad.xml"
run loom-extract "$T/bad.xml"
is_rc 1 "malformed XML: exit 1"
like "$err" "bad.xml': malformed XML at line 4, column 19: mismatched tag" "malformed XML: line and column"
is "$(cat "$out")" "fine text" "malformed XML: page before it written"
bzip2 -c "$T/bad.xml" > "$T/bad.xml.bz2"
run loom-extract -j 2 "$T/bad.xml.bz2"
like "$err" "line 4, column 19" "malformed XML in .bz2: line and column"
printf '<mediawiki><page><title>X</title>' > "$T/short.xml"
run loom-extract "$T/short.xml"
is_rc 1 "XML cut inside a page: exit 1"
like "$err" "short.xml': XML ends inside a <page> \\(line 1\\)" "XML cut: named"

# a page with no <text>
{ pg 1 A "alpha"; printf '  <page><title>Empty</title><ns>0</ns><id>2</id><revision><id>7</id></revision></page>\n'; pg 3 C "gamma"; } | mkdump "$T/notext.xml"
run loom-extract -j 2 "$T/notext.xml"
is_rc 0 "page without <text>: exit 0"
is "$(cat "$out")" "alpha
gamma" "page without <text>: others written"
like "$err" "page 2 'Empty' \(line 4\) has no <text>: skipped" "page without <text>: warned"
like "$err" "1 without text" "page without <text>: counted"

# unterminated template and table
{ pg 1 T "before {{Infobox
| a = {{b|c}}
after"; pg 2 U "text
{|
| cell
never closed"; pg 3 V "ok [[A|b]] {{x"; } | mkdump "$T/unterminated.xml"
run loom-extract --format jsonl "$T/unterminated.xml"
is_rc 0 "unterminated template/table: exit 0"
is "$(python3 -c 'import json,sys; print("|".join(json.loads(l)["text"] for l in sys.stdin))' < "$out")" \
   "before Infobox | a = after|text|ok b x" "unterminated: openers dropped, table runs to the end"

# a 6 MB article of {{{{ (linear time: tests/wikitext.c counts the work)
python3 -c '
import sys
sys.stdout.write("<mediawiki><page><title>Brace</title><ns>0</ns><id>1</id><revision><id>2</id><text>"
  + "{" * 6000000 + "</text></revision></page>"
  + "<page><title>Next</title><ns>0</ns><id>3</id><revision><id>4</id><text>still here</text></revision></page></mediawiki>")' > "$T/braces.xml"
run loom-extract -j 1 "$T/braces.xml"
is_rc 0 "6 MB of {{{{: exit 0"
is "$(cat "$out")" "still here" "6 MB of {{{{: nothing left of it"

# a hostile page: 10 MB of '[[' (a .bz2 of a few hundred bytes).  Peak
# memory (ru_maxrss of the child) against the page's size: the cleaner
# held 24x the page before; now a page over --max-page-size (8M) is not
# even held, and one under it costs a few times its size.
python3 -c '
import bz2, sys
x = ("<mediawiki><page><title>Hostile</title><ns>0</ns><id>1</id><revision><id>2</id><text>"
  + "[[" * 5000000 + "</text></revision></page>"
  + "<page><title>Next</title><ns>0</ns><id>3</id><revision><id>4</id><text>still here</text></revision></page></mediawiki>")
open(sys.argv[1], "wb").write(bz2.compress(x.encode()))' "$T/hostile.xml.bz2"
maxrss() { # command...: its peak resident memory in kB; output to $out, $err
	/usr/bin/python3 -c '
import resource, subprocess, sys
with open(sys.argv[1], "wb") as o, open(sys.argv[2], "wb") as e:
    rc = subprocess.run(sys.argv[3:], stdout=o, stderr=e).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)' "$out" "$err" "$@"
}
read -r kb rc < <(maxrss loom-extract -j 1 "$T/hostile.xml.bz2")
is_rc 0 "page over --max-page-size: exit 0"
is "$(cat "$out")" "still here" "page over --max-page-size: skipped, the next one kept"
like "$err" "^loom-extract: page 1 'Hostile' \(line 1\): 10\.0 MB of wikitext, over --max-page-size: skipped\$" \
	"page over --max-page-size: one line naming it"
like "$err" ", 1 too large," "page over --max-page-size: counted in the summary"
asan=0; ldd "$(command -v loom-extract)" 2>/dev/null | grep -q libasan && asan=1
# (sanitizers hold freed memory in quarantine: peak memory is theirs)
ok "page over --max-page-size: not held (peak $kb kB for a 10 MB page)" \
	test "$asan" = 1 -o "$kb" -lt 40000
read -r kb rc < <(maxrss loom-extract -j 1 --max-page-size 16M "$T/hostile.xml.bz2")
is_rc 0 "--max-page-size 16M: the hostile page is cleaned, exit 0"
like "$err" ", 1 empty or short, 0 without text, 0 too large," "--max-page-size 16M: cleaned (empty)"
ok "--max-page-size 16M: peak memory a small multiple of the page ($kb kB for 10 MB)" \
	test "$asan" = 1 -o "$kb" -lt 120000
run loom-extract --max-page-size 100 "$T/hostile.xml.bz2"
is_rc 2 "--max-page-size 100: exit 2"
like "$err" "^loom-extract: --max-page-size: '100' is not between 1K and 1G" "--max-page-size: range named"

# deeply nested links
python3 -c '
import sys
n = 200000
sys.stdout.write("<mediawiki><page><title>Deep</title><ns>0</ns><id>1</id><revision><id>2</id><text>"
  + "[[" * n + "core" + "]]" * n + " and [[File:x.jpg|" + "[[a|" * 1000 + "cap" + "]]" * 1000 + "]] end"
  + "</text></revision></page></mediawiki>")' > "$T/deep.xml"
run loom-extract "$T/deep.xml"
is_rc 0 "deeply nested links: exit 0"
is "$(cat "$out")" "core and end" "deeply nested links: text"

# invalid UTF-8
printf '<mediawiki><page><title>Bad\xff</title><ns>0</ns><id>1</id><revision><id>2</id><text>caf\xc3 and \xed\xa0\x80 ok \xe2\x82\xac</text></revision></page></mediawiki>\n' > "$T/utf8.xml"
run loom-extract --format jsonl "$T/utf8.xml"
is_rc 0 "invalid UTF-8: exit 0"
is "$(python3 -c 'import json,sys; o=json.loads(sys.stdin.read()); print(o["title"], o["text"])' < "$out")" \
   "Bad� caf� and ��� ok €" "invalid UTF-8: replaced by U+FFFD, valid text kept"
like "$err" " 5 invalid UTF-8" "invalid UTF-8: counted"

# not a dump at all
printf 'hello' | bzip2 > "$T/junk.xml.bz2"
run loom-extract "$T/junk.xml.bz2"
is_rc 1 "not XML: exit 1"
like "$err" "junk.xml.bz2': malformed XML at line 1, column 1" "not XML: named"
printf 'garbage\n' | bzip2 > "$T/g-index.txt.bz2"
run loom-extract --index "$T/g-index.txt.bz2" "$MULTI"
is_rc 1 "bad index: exit 1"
like "$err" "index '.*g-index.txt.bz2', line 1: not 'offset:id:title'" "bad index: named"
{ bzcat "$SAMPLE-multistream-index.txt.bz2" | head -1; echo 1000000000000:99:Far; bzcat "$SAMPLE-multistream-index.txt.bz2" | sed 1d; } |
	bzip2 > "$T/far-index.txt.bz2"
run loom-extract --index "$T/far-index.txt.bz2" "$MULTI"
is_rc 1 "index offset beyond the file: exit 1"
like "$err" "^loom-extract: '.*' ends at byte [0-9]+, but index '.*far-index.txt.bz2', line 2 has a stream at byte 1000000000000 " \
	"index offset beyond the file: names the index, its line and the file's size"
unlike "$err" "out of memory|TB in" "index offset beyond the file: no 'out of memory'"

mkdir "$T/adir"
run loom-extract "$T/adir"
is_rc 1 "a directory: exit 1"
is "$(cat "$err")" "loom-extract: cannot read '$T/adir': Is a directory" "a directory: says so"

# corruption in the first bz2 block: a real offset
python3 -c '
import sys
d = bytearray(open(sys.argv[1], "rb").read()); d[60] ^= 0xff
open(sys.argv[2], "wb").write(d)' "$T/renamed.xml.bz2" "$T/first.xml.bz2"
run loom-extract "$T/first.xml.bz2"
is_rc 1 "corrupt first bz2 block: exit 1"
like "$err" "^loom-extract: cannot read '.*first.xml.bz2' \(within its first [0-9]+ bytes\): " \
	"corrupt first bz2 block: names the bytes read"
unlike "$err" "18446744073709551615" "corrupt first bz2 block: no (uint64_t)-1 offset"

done_testing
