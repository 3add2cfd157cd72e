#!/usr/bin/env bash
# pipelines/retrain and pipelines/wikipedia.mk against hostile values: every
# key of retrain.conf (and $LOOM_MIRROR), and every variable of wikipedia.mk,
# given backticks, $(...), make's $(shell ...) and $$, ';' and a newline.
# Nothing may run (no canary file appears), the tool exits 1 (make: non-zero)
# with one line naming the key, and retrain creates no state.  Also: quoted
# values, and --dry-run neither takes the lock nor writes anything.
# A file:// mirror: no HTTP server needed.
. "$(dirname "$0")/lib.sh"
# retrain's lines start with the UTC time: without it
untimed() { sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z //'; }
ROOT=$(cd "$TESTS/.." && pwd)
P=$ROOT/pipelines
BIN=$(dirname "$(command -v loom-train)")
DUMP=$SHARE/sample/samplewiki-20260101-pages-articles-multistream.xml.bz2

"$P/make-mirror.sh" "$SHARE/sample" samplewiki 20260101 "$T/mirror" >/dev/null
mkdir "$T/run"
cd "$T/run"   # make and the tools run here: an injected `touch canaryN` lands here

# payloads, appended to a valid value (each names its own canary)
pay=('`touch canary1`' '$(touch canary2)' ';touch canary3;' '$$(touch canary4)'
     '$(shell touch canary5)' '`touch$${IFS}canary6`' '&& touch canary7')
NL_PAY=$'"x\ntouch canary8"'   # a quoted value running over two lines

# every key of the example configuration, with a valid value
keys=$(sed -n 's/^\([A-Z_]*\)=.*/\1/p' "$P/retrain.conf.example")
declare -A good=([WIKI]=samplewiki [MIRROR]="file://$T/mirror" [STATE]=state
	[VOCAB]=train [VOCAB_SIZE]=300 [SEQ]=9 [SHARDS]=2 [VAL]=0.1 [PRESET]=tiny [SET]=lr=1e-3
	[STEPS]=4 [BATCH]=4 [SEED]=1 [MODE]=resume [KEEP]=2 [KEEP_DATA]=2 [LOG_DAYS]=30
	[EVAL_BATCHES]=0 [THREADS]=1 [LOOM_BIN]="$BIN")
missing=
for k in $keys; do [ -n "${good[$k]+x}" ] || missing="$missing $k"; done
is "$missing" "" "the test knows every key of retrain.conf.example"

conf() { # KEY VALUE -> $T/c.conf: the good configuration with KEY=VALUE
	local k
	for k in $keys; do
		if [ "$k" = "$1" ]; then printf '%s=%s\n' "$k" "$2"
		else printf '%s=%s\n' "$k" "${good[$k]}"; fi
	done > "$T/c.conf"
}
canaries() { find "$T" -name 'canary*' | sed "s|^$T/||" | tr '\n' ' '; }

# refused KEY WHAT: $rc, $err of the last run show a clean refusal naming KEY
refused() {
	local p= c
	[ "$rc" = 1 ] || p="$p rc=$rc"
	[ "$(wc -l < "$err")" = 1 ] || p="$p $(wc -l < "$err")-line-stderr"
	grep -Eq "(^|[^A-Z_])$1([^A-Z_]|$)" "$err" || p="$p key-not-named:'$(head -1 "$err")'"
	c=$(canaries); [ -z "$c" ] || { p="$p RAN:$c"; find "$T" -name 'canary*' -delete; }
	[ ! -e "$T/state" ] || { p="$p state-created"; rm -rf "$T/state"; }
	[ -z "$p" ] || echo "$2:$p"
}

conf WIKI samplewiki
run "$P/retrain" --config "$T/c.conf" --dry-run
is_rc 0 "the good configuration is accepted (dry run)"
rm -rf "$T/state"
mkdir -p "$T/etc"
conf STATE ../st2; mv "$T/c.conf" "$T/etc/c.conf"
run "$P/retrain" --config "$T/etc/c.conf" --dry-run
is_rc 0 "STATE=../st2 in etc/c.conf"
like "$out" "OUT=$T/st2/data " "  the paths are normalised ($T/st2, not $T/etc/../st2)"
unlike "$out" '/\.\./' "  no /../ anywhere"
rm -rf "$T/st2" "$T/etc"

for k in $keys; do
	bad=
	for i in "${!pay[@]}"; do
		v=${good[$k]}${pay[$i]}
		# a mirror at the hostile path itself, so that only the quoting stands
		# between the value and a shell
		[ "$k" != MIRROR ] || ln -sfn "$T/mirror" "$T/mirror${pay[$i]}"
		conf "$k" "$v"
		run "$P/retrain" --config "$T/c.conf"
		bad="$bad$(refused "$k" "payload $((i + 1))")"
	done
	conf "$k" "$NL_PAY"
	run "$P/retrain" --config "$T/c.conf"
	bad="$bad$(refused "$k" newline)"
	is "$bad" "" "$k: hostile values refused with one line naming $k, nothing run"
done
like "$err" "c.conf: line [0-9]+: $k: " "the message names the file and line"

# $LOOM_MIRROR, the default of MIRROR, is checked the same way
bad=
for v in "file://$T/mirror\`touch canary1\`" $'file:///x\ntouch canary2'; do
	conf MIRROR x; sed -i '/^MIRROR=/d' "$T/c.conf"
	run env LOOM_MIRROR="$v" "$P/retrain" --config "$T/c.conf"
	bad="$bad$(refused MIRROR "LOOM_MIRROR=$v")"
done
is "$bad" "" "a hostile \$LOOM_MIRROR is refused, naming MIRROR"

# numbers: no leading 0 (bash arithmetic would read 010 as octal 8)
conf SEQ 09
run "$P/retrain" --config "$T/c.conf"
is "$(refused SEQ '')" "" "SEQ=09 refused"
like "$err" "SEQ='09' is not a whole number" "as not a whole number"

# values the tools would refuse only after the data build: refused at once
# (--dry-run: before the check it went on to plan a build and exited 0)
bad=
for kv in SEQ=0 SEQ=1 SEQ=16777217 BATCH=0 BATCH=1048577 SHARDS=0 SHARDS=100000 SHARDS=999999999 \
	  STEPS=0 KEEP=0 KEEP_DATA=0 THREADS=1025 VOCAB_SIZE=256; do
	conf "${kv%%=*}" "${kv#*=}"
	run "$P/retrain" --config "$T/c.conf" --dry-run
	bad="$bad$(refused "${kv%%=*}" "$kv")"
	grep -q "c.conf: line [0-9]*: ${kv%%=*}='${kv#*=}' is out of range (" "$err" || bad="$bad $kv:'$(head -1 "$err")'"
done
is "$bad" "" "out of range (SEQ 0, 1; BATCH 0; SHARDS 0, 999999999; ...): refused naming file, line and key"
like "$err" "VOCAB_SIZE='256' is out of range \(257 to 16777216\): with VOCAB=train, " "  and the range"
bad=
for v in 0 1 0.0 1.5 x .; do
	conf VAL "$v"
	run "$P/retrain" --config "$T/c.conf" --dry-run
	grep -q "c.conf: line [0-9]*: VAL='$v' is not a fraction between 0 and 1" "$err" || bad="$bad VAL=$v:rc=$rc"
done
is "$bad" "" "VAL: 0, 1, 0.0, 1.5, x and . refused, naming the key"
bad=
for kv in SEQ=2 SEQ=16777216 BATCH=1 BATCH=1048576 SHARDS=1 SHARDS=99999 THREADS=1024 VOCAB_SIZE=257; do
	conf "${kv%%=*}" "${kv#*=}"
	run "$P/retrain" --config "$T/c.conf" --dry-run
	[ "$rc" = 0 ] || bad="$bad $kv:rc=$rc"
done
conf VOCAB gpt2; echo VOCAB_SIZE=0 >> "$T/c.conf"; sed -i '/^VOCAB_SIZE=300/d' "$T/c.conf"
run "$P/retrain" --config "$T/c.conf" --dry-run
[ "$rc" = 0 ] || bad="$bad VOCAB=gpt2,VOCAB_SIZE=0:rc=$rc"
is "$bad" "" "the ends of each range are accepted (VOCAB_SIZE only matters with VOCAB=train)"

# a key set twice: refused (it was: the last one wins, silently)
conf WIKI samplewiki; echo 'STEPS=5' >> "$T/c.conf"
first=$(grep -n '^STEPS=' "$T/c.conf" | head -1 | cut -d: -f1)
run "$P/retrain" --config "$T/c.conf" --dry-run
is "$(refused STEPS '')" "" "a key set twice is refused"
is "$(untimed < "$err")" "retrain: $T/c.conf: line $(wc -l < "$T/c.conf"): STEPS is set a second time (first on line $first)" \
	"  naming the file, both lines and the key"

# --config DIR: one line (it was a bash error, then the defaults)
run "$P/retrain" --config "$T" --dry-run
is_rc 1 "--config DIR: exit 1"
is "$(untimed < "$err")" "retrain: config '$T' is a directory, not a file" "  one line naming it"
ok "  nothing written" test ! -e "$T/state"

# quoted values are taken literally; a value is one line
conf WIKI '"samplewiki"'
sed -i "s|^MIRROR=.*|MIRROR='file://$T/mirror'|" "$T/c.conf"
run "$P/retrain" --config "$T/c.conf" --dry-run
is_rc 0 "quoted values"
like "$out" "would build samplewiki-20260101 .*MIRROR=file://$T/mirror" "unquoted before use"

# --- --dry-run: no lock, no pid file, nothing written -----------------------
conf WIKI samplewiki
run "$P/retrain" --config "$T/c.conf" --dry-run
is_rc 0 "dry run on a fresh state"
like "$out" 'would build samplewiki-20260101 \(newer than no data\)' "names the dump"
ok "writes nothing (no state directory)" test ! -e "$T/state"
mkdir -p "$T/state"
echo 424242 > "$T/state/retrain.pid"
# a run in progress: holds the lock until told to stop (no sleep to race)
flock "$T/state/retrain.lock" bash -c 'while [ ! -e "$1" ]; do sleep 0.05; done' _ "$T/release" &
holder=$!
while flock -n "$T/state/retrain.lock" true; do sleep 0.05; done   # until it holds it
run "$P/retrain" --config "$T/c.conf" --dry-run
is_rc 0 "dry run while a run holds the lock"
is "$(cat "$T/state/retrain.pid")" 424242 "the running one's pid file is untouched"
is "$(ls -A "$T/state" | tr '\n' ' ')" "retrain.lock retrain.pid " "nothing else written"
run "$P/retrain" --config "$T/c.conf"
is_rc 75 "a real run still meets the lock"
like "$err" "another run holds $T/state/retrain.lock: pid $holder \\(flock " \
	"naming the process that holds the lock, not the stale pid in retrain.pid"
touch "$T/release"; wait $holder

# --- wikipedia.mk on its own: variables from make's command line -------------
mkvars="WIKI DATE OUT VOCAB SEQ SHARDS VAL SEED JOBS VOCAB_SIZE MIRROR DUMP NAME LOOM_BIN
	EXTRACT_FLAGS SHARD_FLAGS"
declare -A mgood=([WIKI]=samplewiki [DATE]=20260101 [OUT]="$T/mk" [VOCAB]=gpt2 [SEQ]=9
	[SHARDS]=2 [VAL]=0.1 [SEED]=1 [JOBS]=1 [VOCAB_SIZE]=300 [MIRROR]="file://$T/mirror" [DUMP]="$DUMP"
	[NAME]=sample [LOOM_BIN]="$BIN/" [EXTRACT_FLAGS]=-q [SHARD_FLAGS]=-q)
mk() { # VAR VALUE
	local v args=()
	for v in $mkvars; do
		if [ "$v" = "$1" ]; then args+=("$v=$2"); else args+=("$v=${mgood[$v]}"); fi
	done
	run make -s -f "$P/wikipedia.mk" "${args[@]}" fetch
}
mk WIKI samplewiki
is_rc 0 "wikipedia.mk: the good variables work"
rm -rf "$T/mk"
mpay=("${pay[@]}" $'\ntouch canary8')   # payload 8: a newline
for v in $mkvars; do
	bad=
	for i in "${!mpay[@]}"; do
		mk "$v" "${mgood[$v]}${mpay[$i]}"
		p=
		[ "$rc" != 0 ] || p="$p rc=0"
		[ "$(wc -l < "$err")" = 1 ] || p="$p $(wc -l < "$err")-line-stderr"
		grep -q "$v" "$err" || p="$p var-not-named:'$(head -1 "$err")'"
		c=$(canaries); [ -z "$c" ] || { p="$p RAN:$c"; find "$T" -name 'canary*' -delete; }
		[ -z "$p" ] || bad="$bad payload $((i + 1)):$p"
	done
	is "$bad" "" "wikipedia.mk $v: hostile values refused, naming $v, nothing run"
done
like "$err" "wikipedia.mk:[0-9]+: \*\*\* SHARD_FLAGS" "make's own error format"
done_testing
