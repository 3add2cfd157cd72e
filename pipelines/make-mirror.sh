#!/usr/bin/env bash
# make-mirror.sh - lay out dump files like dumps.wikimedia.org, so that
# loom-fetch can download them from a local or file:// mirror.
#
#   make-mirror.sh SRC_DIR WIKI DATE OUT_DIR
#
# Takes every SRC_DIR/WIKI-DATE-* file (e.g. samplewiki-20260101-pages-
# articles-multistream.xml.bz2 and its -index.txt.bz2) and writes:
#   OUT_DIR/WIKI/DATE/WIKI-DATE-*             copies of the files
#   OUT_DIR/WIKI/DATE/WIKI-DATE-sha1sums.txt  "<sha1>  <name>" lines
#   OUT_DIR/WIKI/DATE/WIKI-DATE-md5sums.txt   "<md5>  <name>" lines
#   OUT_DIR/WIKI/DATE/dumpstatus.json         {"jobs": {JOB: {"status": "done",
#                                              "files": {NAME: {size,url,md5,sha1}}}}}
#   OUT_DIR/WIKI/latest/                      WIKI-latest-* links to those,
#       dumpstatus.json and WIKI-latest-{sha1,md5}sums.txt listing the DATED
#       names, as Wikimedia publishes them.
# Jobs are named as Wikimedia names them (articlesmultistreamdump, ...).
set -euo pipefail
prog=make-mirror.sh
die() { echo "$prog: $*" >&2; exit 1; }
[ $# -eq 4 ] || { sed -n '2,17s/^# \{0,1\}//p' "$0" >&2; exit 2; }
src=$1 wiki=$2 date=$3 out=$4
[ -d "$src" ] || die "'$src' is not a directory"
[[ $wiki =~ ^[a-z0-9_-]+$ ]] || die "'$wiki' is not a wiki name like enwiki"
[[ $date =~ ^[0-9]{8}$ ]] || die "'$date' is not YYYYMMDD"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

shopt -s nullglob
files=("$src/$wiki-$date-"*)
[ ${#files[@]} -gt 0 ] || die "no $wiki-$date-* files in '$src'"
d="$out/$wiki/$date" l="$out/$wiki/latest"
mkdir -p "$d" "$l"
names=()
for f in "${files[@]}"; do
	n=${f##*/}
	case $n in *-sha1sums.txt|*-md5sums.txt|*.part) continue ;; esac
	[ -f "$f" ] || continue
	# a copy (cheap with reflinks), so that nothing done to the mirror
	# (a test corrupting a file, say) can touch the source
	rm -f "$d/$n"
	cp --reflink=auto "$f" "$d/$n"
	rm -f "$l/$wiki-latest-${n#"$wiki-$date-"}"
	ln "$d/$n" "$l/$wiki-latest-${n#"$wiki-$date-"}" 2>/dev/null ||
		cp "$d/$n" "$l/$wiki-latest-${n#"$wiki-$date-"}"
	names+=("$n")
done
(cd "$d" && sha1sum -- "${names[@]}") >"$d/$wiki-$date-sha1sums.txt"
(cd "$d" && md5sum -- "${names[@]}") >"$d/$wiki-$date-md5sums.txt"
cp "$d/$wiki-$date-sha1sums.txt" "$l/$wiki-latest-sha1sums.txt"
cp "$d/$wiki-$date-md5sums.txt" "$l/$wiki-latest-md5sums.txt"

"$PY" - "$d" "$wiki" "$date" <<'EOF'
import json, os, sys, time
d, wiki, date = sys.argv[1:4]
def sums(kind):
    out = {}
    with open(os.path.join(d, f"{wiki}-{date}-{kind}sums.txt")) as f:
        for line in f:
            h, name = line.rstrip("\n").split("  ", 1)
            out[name] = h
    return out
sha1, md5 = sums("sha1"), sums("md5")
jobs_of = [("-pages-articles-multistream", "articlesmultistreamdump"),
           ("-pages-articles.", "articlesdump"),
           ("-pages-meta-current", "metacurrentdump"),
           ("-pages-meta-history", "metahistorybz2dump"),
           ("-abstract", "abstractsdump"),
           ("-stub-", "xmlstubsdump")]
updated = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
jobs = {}
for name in sorted(sha1):
    job = next((j for k, j in jobs_of if k in name), "tables")
    st = os.stat(os.path.join(d, name))
    jobs.setdefault(job, {"status": "done", "updated": updated, "files": {}})
    jobs[job]["files"][name] = {"size": st.st_size, "url": f"/{wiki}/{date}/{name}",
                                "md5": md5[name], "sha1": sha1[name]}
with open(os.path.join(d, "dumpstatus.json"), "w") as f:
    json.dump({"jobs": jobs, "version": "0.8"}, f, indent=1)
    f.write("\n")
EOF
cp "$d/dumpstatus.json" "$l/dumpstatus.json"
echo "$d"
