#!/usr/bin/env bash
# loom-fetch against real HTTP servers on 127.0.0.1: lighttpd (Range
# support) serving a test dump laid out like dumps.wikimedia.org by
# pipelines/make-mirror.sh, a python3-stdlib server that drops the
# connection half way (or answers 503, or waits half way until told to go
# on), python's http.server (ignores Range), a file:// mirror, and a port
# nobody listens on.
. "$(dirname "$0")/lib.sh"
"$TESTS/../pipelines/mirror.sh" available || skip_all "lighttpd not installed (make deps)"
PIPE="$TESTS/../pipelines"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
FAST=(--retries 2 --retry-delay 0.05 --timeout 5)

pids=()
cleanup() {
	"$PIPE/mirror.sh" stop "$T/state" >/dev/null 2>&1 || true
	for p in "${pids[@]}"; do signal_ours TERM "$p"; done
	rm -rf "$T"
}
trap cleanup EXIT

free_port() {
	"$PY" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
wait_port() { # port
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
# Wait (up to a minute) until a file holds at least n bytes.
wait_size() { # file n
	for _ in $(seq 1200); do
		[ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -ge "$2" ] && return 0
		sleep 0.05
	done
	return 1
}
# Wait (up to a minute) until a file matches a regex.
wait_match() { # file regex
	for _ in $(seq 1200); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
# lighttpd buffers its access log: flush it and wait for a line.
wait_log() { # regex
	wait_count "$1" 1
}
# ... until the regex matches n lines.
wait_count() { # regex n
	"$PIPE/mirror.sh" flush "$T/state"
	for _ in $(seq 200); do
		[ "$(grep -Ec -- "$1" "$T/state/access.log")" -ge "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

# --- a test dump: random "dump" and "index", laid out as a mirror -------
W=testwiki D=20250801
mkdir -p "$T/src" "$T/mirror"
DUMP=$W-$D-pages-articles-multistream.xml.bz2
INDEX=$W-$D-pages-articles-multistream-index.txt.bz2
head -c 300000 /dev/urandom >"$T/src/$DUMP"
head -c 7000 /dev/urandom >"$T/src/$INDEX"
SHA=$(sha1sum <"$T/src/$DUMP" | cut -c1-40)
run "$PIPE/make-mirror.sh" "$T/src" $W $D "$T/mirror"
is_rc 0 "make-mirror.sh lays out the dump"
ok "dated dir has dump, index, sha1sums, dumpstatus.json" \
	test -f "$T/mirror/$W/$D/$DUMP" -a -f "$T/mirror/$W/$D/$INDEX" \
	-a -f "$T/mirror/$W/$D/$W-$D-sha1sums.txt" -a -f "$T/mirror/$W/$D/dumpstatus.json"
ok "latest/ has dumpstatus.json and $W-latest-* files" \
	test -f "$T/mirror/$W/latest/dumpstatus.json" \
	-a -f "$T/mirror/$W/latest/$W-latest-pages-articles-multistream.xml.bz2" \
	-a -f "$T/mirror/$W/latest/$W-latest-sha1sums.txt"
like "$T/mirror/$W/$D/$W-$D-sha1sums.txt" "^$SHA  $DUMP\$" "sha1sums.txt line"

# a second wiki with only sha1sums.txt, a third with a corrupted dump, a
# fourth whose job is still running, a fifth with a malformed dumpstatus
for w in nostatuswiki badwiki runningwiki brokenwiki; do
	cp "$T/src/$DUMP" "$T/src/$w-$D-pages-articles-multistream.xml.bz2"
	cp "$T/src/$INDEX" "$T/src/$w-$D-pages-articles-multistream-index.txt.bz2"
	"$PIPE/make-mirror.sh" "$T/src" $w $D "$T/mirror" >/dev/null
done
rm "$T/mirror/nostatuswiki/$D/dumpstatus.json"
head -c 300000 /dev/zero >"$T/zeros"
rm "$T/mirror/badwiki/$D/badwiki-$D-pages-articles-multistream.xml.bz2"
cp "$T/zeros" "$T/mirror/badwiki/$D/badwiki-$D-pages-articles-multistream.xml.bz2"
sed -i 's/"done"/"in-progress"/' "$T/mirror/runningwiki/$D/dumpstatus.json"
printf '{"jobs": {"articlesmultistreamdump": {"status": "done", "files": {"%s": {"size": "big"}}}}}' \
	"brokenwiki-$D-pages-articles-multistream.xml.bz2" >"$T/mirror/brokenwiki/$D/dumpstatus.json"

run "$PIPE/mirror.sh" start "$T/mirror" "$T/state"
is_rc 0 "mirror.sh starts lighttpd"
M=$(cat "$out")
like "$out" '^http://127\.0\.0\.1:[0-9]+$' "mirror.sh prints the URL"

# --- full download with --date latest ------------------------------------
run loom-fetch --mirror "$M" --wiki $W --date latest -o "$T/out"
is_rc 0 "dump download exits 0"
same_file "$T/out/$DUMP" "$T/src/$DUMP" "dump downloaded intact, named with the real date"
same_file "$T/out/$INDEX" "$T/src/$INDEX" "index downloaded intact"
is "$(cat "$out")" "$T/out/$DUMP
$T/out/$INDEX" "stdout lists the verified files"
like "$err" "^loom-fetch: $W latest is $D\$" "latest resolved to the date"
like "$err" "^loom-fetch: $DUMP: 300\.0 kB, sha1 $SHA verified, [0-9.]+ s, [0-9.]+ MB/s\$" \
	"summary line: name, size, verified sha1, seconds, MB/s"
like "$err" "^loom-fetch: $INDEX: 7\.0 kB, sha1 [0-9a-f]{40} verified" "index summary"
ok "no .part left" test ! -e "$T/out/$DUMP.part"
no_tmp_left "$T/out" "no temporary files left"
ok "dump fetched from the dated directory" wait_log "GET /$W/$D/$DUMP HTTP/1.1\" 200 300000"

# --- second run: nothing to do ------------------------------------------
mtime=$(stat -c %Y.%s "$T/out/$DUMP")
wait_log "GET /$W/$D/$INDEX"
n_before=$(grep -c "$DUMP" "$T/state/access.log")
run loom-fetch --mirror "$M" --wiki $W -o "$T/out"
is_rc 0 "second run exits 0"
like "$err" "^loom-fetch: $DUMP: already complete \(300\.0 kB, sha1 $SHA verified earlier\)\$" \
	"second run says already complete (trusting its verification record)"
like "$err" "^loom-fetch: $INDEX: already complete" "index already complete"
ok "second run asked for dumpstatus.json" wait_count "GET /$W/latest/dumpstatus.json" 2
is "$(grep -c "GET /$W/latest/dumpstatus.json" "$T/state/access.log")" 2 "and only that once more"
is "$(grep -c "$DUMP" "$T/state/access.log")" "$n_before" "second run did not download the dump again"
is "$(stat -c %Y.%s "$T/out/$DUMP")" "$mtime" "file untouched"

run loom-fetch --recheck --mirror "$M" --wiki $W -o "$T/out"
is_rc 0 "--recheck exits 0"
like "$err" "^loom-fetch: $DUMP: already complete \(300\.0 kB, sha1 $SHA verified\)\$" \
	"--recheck rehashes the present file"
# a file changed since it was verified (same size) is rehashed and replaced
"$PY" -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(1000); f.write(b"X" * 10)' "$T/out/$DUMP"
run loom-fetch --mirror "$M" --wiki $W -o "$T/out"
is_rc 0 "changed file: exits 0"
like "$err" "^loom-fetch: $DUMP: 300\.0 kB, sha1 $SHA verified" "changed file fetched again"
same_file "$T/out/$DUMP" "$T/src/$DUMP" "changed file replaced by the verified one"

run loom-fetch -q --mirror "$M" --wiki $W -o "$T/out"
is_rc 0 "-q exits 0"
is "$(wc -c <"$err")" 0 "-q: nothing on stderr"

# --- explicit date, LOOM_MIRROR, file:// ---------------------------------
rc=0; LOOM_MIRROR="$M/" loom-fetch --wiki $W --date $D -o "$T/out2" >"$out" 2>"$err" || rc=$?
is_rc 0 "LOOM_MIRROR and --date YYYYMMDD"
same_file "$T/out2/$DUMP" "$T/src/$DUMP" "dated download intact"
unlike "$err" "latest is" "no latest resolution for a fixed date"

run loom-fetch --mirror "file://$T/mirror" --wiki $W -o "$T/out3"
is_rc 0 "file:// mirror"
same_file "$T/out3/$DUMP" "$T/src/$DUMP" "file:// download intact"
like "$err" "sha1 $SHA verified" "file:// download verified"

# --- only sha1sums.txt published ------------------------------------------
run loom-fetch --mirror "$M" --wiki nostatuswiki -o "$T/out4"
is_rc 0 "falls back to sha1sums.txt without dumpstatus.json"
like "$err" "^loom-fetch: nostatuswiki latest is $D\$" "latest resolved from $W-latest-sha1sums.txt"
like "$err" "nostatuswiki-$D-pages-articles-multistream.xml.bz2: 300\.0 kB, sha1 $SHA verified" \
	"verified against sha1sums.txt"

# --- resume after a server that drops the connection half way ----------
cat >"$T/drop.py" <<'EOF'
import http.server, sys
import os, time
mode, path, portfile = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(path, "rb").read()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if mode == "503":
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        if mode == "gate": # the rest once PORTFILE.go exists
            while not os.path.exists(portfile + ".go"):
                time.sleep(0.05)
            self.wfile.write(data[len(data) // 2 :])
            self.wfile.flush()
        self.close_connection = True
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(portfile + ".tmp", "w").write(str(s.server_address[1]))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
EOF
"$PY" "$T/drop.py" drop "$T/src/$DUMP" "$T/drop.port" & pids+=("$(pid_token $!)")
"$PY" "$T/drop.py" 503 "$T/src/$DUMP" "$T/503.port" & pids+=("$(pid_token $!)")
"$PY" "$T/drop.py" gate "$T/src/$DUMP" "$T/gate.port" & pids+=("$(pid_token $!)")
for _ in $(seq 100); do [ -f "$T/drop.port" ] && [ -f "$T/503.port" ] && [ -f "$T/gate.port" ] && break; sleep 0.05; done
DROP=http://127.0.0.1:$(cat "$T/drop.port")
S503=http://127.0.0.1:$(cat "$T/503.port")
GATE=http://127.0.0.1:$(cat "$T/gate.port")

mkdir -p "$T/r"
run loom-fetch "${FAST[@]}" "$DROP/$W/$D/$DUMP" -o "$T/r/dump.bz2" --sha1 "$SHA"
is_rc 75 "dropped connection: exit 75 after retries"
like "$err" "^loom-fetch: $DROP/$W/$D/$DUMP: .*(gave up after 3 attempts)" "message names URL and attempts"
ok "no final file after a dropped connection" test ! -e "$T/r/dump.bz2"
is "$(stat -c %s "$T/r/dump.bz2.part" 2>/dev/null)" 150000 ".part keeps the first half"
run loom-fetch "$M/$W/$D/$DUMP" -o "$T/r/dump.bz2" --sha1 "$SHA"
is_rc 0 "resume from the .part against lighttpd"
same_file "$T/r/dump.bz2" "$T/src/$DUMP" "resumed file intact"
like "$err" "^loom-fetch: dump.bz2: 300\.0 kB \(resumed at 150\.0 kB\), sha1 $SHA verified" \
	"summary says resumed"
ok "lighttpd answered the Range with only the rest (206, 150000 bytes)" \
	wait_log "GET /$W/$D/$DUMP HTTP/1.1\" 206 150000 \"bytes=150000-\""
ok ".part gone after success" test ! -e "$T/r/dump.bz2.part"
run loom-fetch -q "$M/$W/$D/$DUMP" -o "$T/new/sub/dump.bz2" --sha1 "$SHA"
is_rc 0 "URL mode: missing parent directories of -o are created"
same_file "$T/new/sub/dump.bz2" "$T/src/$DUMP" "  the file is there, intact"

# resume in dump mode from a .part left by an earlier run
mkdir -p "$T/out5"
head -c 100000 "$T/src/$DUMP" >"$T/out5/$DUMP.part"
run loom-fetch --mirror "$M" --wiki $W -o "$T/out5"
is_rc 0 "dump mode resumes a .part"
like "$err" "$DUMP: 300\.0 kB \(resumed at 100\.0 kB\), sha1 $SHA verified" "dump resume summary"
same_file "$T/out5/$DUMP" "$T/src/$DUMP" "dump resumed intact"

# a .part with wrong bytes: resumed data mismatches, refetched from scratch
head -c 100000 /dev/zero >"$T/r/bad.bz2.part"
run loom-fetch "$M/$W/$D/$DUMP" -o "$T/r/bad.bz2" --sha1 "$SHA"
is_rc 0 "corrupt .part: refetched from scratch after the mismatch"
same_file "$T/r/bad.bz2" "$T/src/$DUMP" "refetched file intact"
unlike "$err" "resumed at" "final data not resumed"

# a server that ignores Range (python http.server answers 200): restart cleanly
HP=$(free_port)
"$PY" -m http.server --bind 127.0.0.1 --directory "$T/mirror" "$HP" >/dev/null 2>&1 & pids+=("$(pid_token $!)")
wait_port "$HP"
head -c 100000 "$T/src/$DUMP" >"$T/r/norange.bz2.part"
run loom-fetch "http://127.0.0.1:$HP/$W/$D/$DUMP" -o "$T/r/norange.bz2" --sha1 "$SHA"
is_rc 0 "server without Range support: restarted from byte 0"
same_file "$T/r/norange.bz2" "$T/src/$DUMP" "restarted file intact"
unlike "$err" "resumed at" "not reported as resumed"

# --- checksum mismatch -----------------------------------------------------
BAD=0000000000000000000000000000000000000000
run loom-fetch "$M/$W/$D/$DUMP" -o "$T/r/mm.bz2" --sha1 $BAD
is_rc 1 "checksum mismatch: exit 1"
like "$err" "^loom-fetch: $M/$W/$D/$DUMP: sha1 mismatch: expected $BAD, got $SHA \(download removed\)\$" \
	"mismatch message names URL, expected and actual"
ok "bad file removed (no final, no .part)" test ! -e "$T/r/mm.bz2" -a ! -e "$T/r/mm.bz2.part"

run loom-fetch --mirror "$M" --wiki badwiki -o "$T/out6"
is_rc 1 "dump whose file does not match its published sha1: exit 1"
like "$err" "badwiki-$D-pages-articles-multistream.xml.bz2: sha1 mismatch: expected $SHA, got" \
	"dump mismatch message"
ok "bad dump file removed" test ! -e "$T/out6/badwiki-$D-pages-articles-multistream.xml.bz2" \
	-a ! -e "$T/out6/badwiki-$D-pages-articles-multistream.xml.bz2.part"

run loom-fetch "$M/$W/$D/$DUMP" -o "$T/r/sizeonly.bz2" --size 300000
is_rc 0 "--size alone: downloaded"
like "$err" "sizeonly\.bz2: 300\.0 kB, sha1 $SHA \(not verified: no checksum given\)" \
	"a size check alone is not called verified"
run loom-fetch "$M/$W/$D/$DUMP" -o "$T/r/size.bz2" --size 12345
is_rc 1 "size mismatch: exit 1"
like "$err" "the server sends 300000 bytes, expected 12345" "size mismatch found before downloading"

# a present but different file is replaced by the verified one
cp "$T/zeros" "$T/r/replace.bz2"
run loom-fetch "$M/$W/$D/$DUMP" -o "$T/r/replace.bz2" --sha1 "$SHA"
is_rc 0 "stale file with the wrong checksum is fetched again"
same_file "$T/r/replace.bz2" "$T/src/$DUMP" "stale file replaced"

# --- 404, server errors, server down ---------------------------------------
run loom-fetch "${FAST[@]}" "$M/$W/$D/nothing.bz2" -o "$T/r/x"
is_rc 1 "404: exit 1"
like "$err" "^loom-fetch: $M/$W/$D/nothing\.bz2: HTTP 404 Not Found\$" "404 names URL and status"
ok "404 leaves no file and no empty .part" test ! -e "$T/r/x" -a ! -e "$T/r/x.part"

run loom-fetch "${FAST[@]}" --mirror "$M" --wiki $W --date 20240101 -o "$T/out7"
is_rc 1 "missing dump date: exit 1"
like "$err" "$M/$W/20240101/$W-20240101-sha1sums.txt: HTTP 404" "names the missing listing"

run loom-fetch "${FAST[@]}" "$S503/x.bz2" -o "$T/r/x"
is_rc 75 "HTTP 503 after retries: exit 75"
like "$err" "HTTP 503 Service Unavailable \(gave up after 3 attempts\)" "503 message"

DOWN=$(free_port)
run loom-fetch "${FAST[@]}" --mirror "http://127.0.0.1:$DOWN" --wiki $W -o "$T/out8"
is_rc 75 "server down: exit 75"
like "$err" "127\.0\.0\.1:$DOWN/$W/latest/dumpstatus\.json: .*(gave up after 3 attempts)" \
	"server down message names URL"
run loom-fetch "${FAST[@]}" "http://127.0.0.1:$DOWN/x" -o "$T/r/x"
is_rc 75 "single URL, server down: exit 75"

# --- malformed listings, unfinished jobs ---------------------------------
run loom-fetch --mirror "$M" --wiki brokenwiki --date $D -o "$T/out9"
is_rc 1 "malformed dumpstatus.json: exit 1"
like "$err" "brokenwiki/$D/dumpstatus\.json: jobs\.articlesmultistreamdump\.files\.brokenwiki-$D-pages-articles-multistream\.xml\.bz2\.size: not a non-negative integer" \
	"malformed field named with its file and path"
printf '{"jobs": {' >"$T/mirror/brokenwiki/$D/dumpstatus.json"
run loom-fetch --mirror "$M" --wiki brokenwiki --date $D -o "$T/out9"
is_rc 1 "truncated dumpstatus.json: exit 1"
like "$err" "brokenwiki/$D/dumpstatus\.json: line 1, column [0-9]+: " "syntax error with line and column"

run loom-fetch --mirror "$M" --wiki runningwiki --date $D -o "$T/out10"
is_rc 75 "dump job still running: exit 75"
like "$err" "job articlesmultistreamdump is 'in-progress', not done: try again later" "running job message"

# --- usage ------------------------------------------------------------------
run loom-fetch --date 2025-08-01 -o "$T/x"
is_rc 2 "bad --date: exit 2"
like "$err" "^loom-fetch: --date: '2025-08-01' is not 'latest' or YYYYMMDD" "--date message"
run loom-fetch --mirror "$M"
is_rc 2 "missing -o: exit 2"
run loom-fetch --mirror "$M" -o ""
is_rc 2 "empty -o: exit 2"
run loom-fetch "$M/x" --sha1 abc
is_rc 2 "bad --sha1: exit 2"
run loom-fetch --what nonsense -o "$T/x"
is_rc 2 "bad --what: exit 2"
run loom-fetch --help
is_rc 0 "--help exits 0"
like "$out" "^usage: loom-fetch" "--help on stdout"
run loom-fetch --version
is_rc 0 "--version"
like "$out" "libcurl/[0-9]" "--version names libcurl"

"$PIPE/mirror.sh" stop "$T/state"
ok "mirror.sh stop stops lighttpd" test ! -e "$T/state/pid"

# --- progress: a server that sends half and waits until an update shows it.
# (The rate and ETA count from the request, so their values, and how many
# updates a short transfer gets, depend on time: a throttled lighttpd held
# 30 s by SIGSTOP before it answered gave only 'ETA 0:14' and 'ETA 0:15'.)
loom-fetch --progress "$GATE/$W/$D/$DUMP" -o "$T/r/slow.bz2" --sha1 "$SHA" >"$T/slow.out" 2>"$T/slow.err" &
fpid=$!
ok "--progress: an update shows the first half" wait_match "$T/slow.err" '150\.0 kB / 300\.0 kB'
touch "$T/gate.port.go"
rc=0; wait $fpid || rc=$?
is "$rc" 0 "download with --progress"
like "$T/slow.err" $'\rloom-fetch: slow\.bz2  150\.0 kB / 300\.0 kB \(50%\)  [0-9.]+ [kMG]?B/s  ETA [0-9]+(:[0-9]{2})+\033\\[K' \
	"  bytes, total, percent, rate, ETA"
like "$T/slow.err" "loom-fetch: slow\.bz2: 300\.0 kB, sha1 $SHA verified" "  the summary after it"
# killed half way (as by cron's timeout): the .part stays and is resumed.
# A server at 8 kB/s (300 kB take ~37 s) and a kill once the .part holds
# 16 kB: the download cannot end before the signal, however loaded the machine.
M3=$(MIRROR_KBPS=8 "$PIPE/mirror.sh" start "$T/mirror" "$T/state")
loom-fetch -q "$M3/$W/$D/$DUMP" -o "$T/r/int.bz2" --sha1 "$SHA" >/dev/null 2>&1 & kpid=$! ktok=$(pid_token $!)
ok "the throttled download writes 16 kB of its .part" wait_size "$T/r/int.bz2.part" 16000
signal_ours TERM "$ktok" loom-fetch
rc=0; wait $kpid || rc=$?
is "$rc" 143 "SIGTERM ends loom-fetch"
psize=$(stat -c %s "$T/r/int.bz2.part" 2>/dev/null || echo 0)
ok "killed download keeps its .part ($psize bytes)" test "$psize" -gt 0 -a "$psize" -lt 300000
ok "no final file after the kill" test ! -e "$T/r/int.bz2"
"$PIPE/mirror.sh" stop "$T/state"
M2=$("$PIPE/mirror.sh" start "$T/mirror" "$T/state")
run loom-fetch "$M2/$W/$D/$DUMP" -o "$T/r/int.bz2" --sha1 "$SHA"
is_rc 0 "rerun after the kill"
like "$err" "int\.bz2: 300\.0 kB \(resumed at [0-9.]+ kB\), sha1 $SHA verified" "rerun resumed"
same_file "$T/r/int.bz2" "$T/src/$DUMP" "resumed after kill: intact"

run loom-fetch "$M2/$W/$D/$INDEX" -o "$T/r/idx.bz2"
is_rc 0 "no progress when stderr is not a terminal"
unlike "$err" $'\r' "no progress lines in a file"
like "$err" "idx\.bz2: 7\.0 kB, sha1 [0-9a-f]{40} \(not verified: no checksum given\)" \
	"unverified download says so"
# -o DIR/ (a trailing slash): the paths printed have one slash
run loom-fetch -q "$M2/$W/$D/$INDEX" -o "$T/r/"
is "$(cat "$out")" "$T/r/$INDEX" "-o DIR/: DIR/file, not DIR//file"
run loom-fetch -q --mirror "$M2" --wiki $W --date latest -o "$T/out/"
is "$(cat "$out")" "$T/out/$DUMP
$T/out/$INDEX" "  also for a whole dump"
done_testing
