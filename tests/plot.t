#!/usr/bin/env bash
# loom-plot: training log -> sparkline lines + SVG chart.
. "$(dirname "$0")/lib.sh"

for i in 1 2 3 4 5 6 7 8 9 10; do
	awk -v i=$i 'BEGIN { printf "{\"step\":%d,\"loss\":%g,\"lr\":0.001}\n", i, 10 / i }'
done > "$T/log.jsonl"
echo '{"step":10,"eval_loss":2.5}' >> "$T/log.jsonl"

run loom-plot "$T/log.jsonl" -o "$T/chart.svg" --title 'a <run>'
is_rc 0 "plots a log"
like "$out" '^loss +10 .* 1 +min 1 +\(10 points, step 1\.\.10\)' "loss line: first, last, min, count"
like "$out" '^eval_loss +2\.5 ' "eval series from the eval line"
is "$(head -c 1 "$out" | wc -c)" 1 "stdout has data"
is "$(wc -c < "$err")" 0 "nothing on stderr"
like "$T/chart.svg" '^<svg xmlns="http://www.w3.org/2000/svg"' "SVG written"
like "$T/chart.svg" 'a &lt;run&gt;' "title escaped"
is "$(grep -c 'class="raw"' "$T/chart.svg")" 1 "one raw training curve"
is "$(grep -c 'class="smooth"' "$T/chart.svg")" 1 "smoothed by default, drawn over it"
like "$T/chart.svg" 'class="raw"[^>]*stroke-opacity="0.25"' "the raw curve is faint"
is "$(grep -c 'class="eval"' "$T/chart.svg")" 1 "eval series drawn as points"
is "$(grep -c '<circle' "$T/chart.svg")" 2 "a marker per eval point (and its legend entry)"
like "$T/chart.svg" 'class="ylabel"[^>]*>loss \(nats/token\)</text>' "y axis label with the unit"
like "$T/chart.svg" 'class="xlabel"[^>]*>step</text>' "x axis label"
is "$(grep -c 'class="legend-entry"' "$T/chart.svg")" 2 "a legend entry per series"
like "$T/chart.svg" 'class="legend-entry"[^>]*>loss <' "legend names the key"
no_tmp_left "$T" "no temporary file left"

smooth_d() { grep -o "class=\"$1\"[^>]*" "$2" | grep -o ' d="[^"]*"'; }
run loom-plot -q --smooth 0 "$T/log.jsonl" -o "$T/raw.svg" --title "a <run>"
is_rc 0 "--smooth 0"
is "$(wc -c < "$out")" 0 "-q: no sparkline lines"
is "$(grep -c 'class="smooth"' "$T/raw.svg")" 0 "--smooth 0 draws no moving average"
unlike "$T/raw.svg" 'stroke-opacity' "and the raw curve at full strength"
is "$(smooth_d raw "$T/raw.svg")" "$(smooth_d raw "$T/chart.svg")" "raw curve does not depend on smoothing"
ok "the smoothed path differs from the raw one" test "$(smooth_d smooth "$T/chart.svg")" != "$(smooth_d raw "$T/chart.svg")"
run loom-plot -q --smooth 0.9 "$T/log.jsonl" -o "$T/s9.svg"
ok "a heavier weight changes the smoothed path" test "$(smooth_d smooth "$T/s9.svg")" != "$(smooth_d smooth "$T/chart.svg")"
# debiased EMA: the first smoothed point equals the first raw one
is "$(smooth_d smooth "$T/s9.svg" | grep -o 'M[0-9.,]*')" "$(smooth_d raw "$T/s9.svg" | grep -o 'M[0-9.,]*')" "smoothing starts at the first point (debiased)"
run loom-plot --smooth 1 "$T/log.jsonl"
is_rc 2 "--smooth 1 is a usage error"

run loom-plot -q --logy "$T/log.jsonl" -o "$T/logy.svg"
is "$(grep -o 'text-anchor="end" fill="#666">[^<]*' "$T/logy.svg" | sed 's/.*>//' | tr '\n' ' ')" "1 2 5 10 " \
	"--logy over a decade: ticks at 1, 2, 5 x 10^k"
run loom-plot -q "$T/log.jsonl" -o "$T/lin.svg"
is "$(grep -o 'text-anchor="end" fill="#666">[^<]*' "$T/lin.svg" | sed 's/.*>//' | tr '\n' ' ')" "2 4 6 8 10 " \
	"linear y: nice steps"

# several runs overlaid, and the lr / tokens/s panels
for r in a b; do
	awk -v r=$r 'BEGIN { for (i = 1; i <= 20; i++) printf "{\"step\":%d,\"loss\":%g,\"lr\":%g,\"tokens_per_s\":%d}\n", i, (r == "a" ? 8 : 9) / i + i % 3, 0.001 * i / 20, 1000 + i
	      printf "{\"step\":20,\"eval_loss\":2}\n" }' > "$T/$r.jsonl"
done
mkdir "$T/runs"
run loom-plot "$T/a.jsonl" "$T/b.jsonl" --panels -o "$T/runs/both.svg"
is_rc 0 "two runs, with panels"
like "$out" '^a loss ' "sparkline lines name the run"
like "$out" '^b tokens_per_s ' "and include the panel keys"
is "$(grep -c '<path[^>]*data-run="a"' "$T/runs/both.svg")" 6 "run a: raw+smooth loss, eval, raw lr, raw+smooth tokens/s"
is "$(grep -c '<path[^>]*data-run="b"' "$T/runs/both.svg")" 6 "run b likewise"
is "$(grep -c '<path class="smooth"[^>]*data-key="lr"' "$T/runs/both.svg")" 0 "the lr schedule is not smoothed"
is "$(grep -c '<path class="raw"[^>]*data-key="lr"[^>]*stroke-width="1.5"' "$T/runs/both.svg")" 2 "  but drawn raw, full strength (both runs)"
is "$(grep -o 'class="legend-entry"[^>]*>[^<]*' "$T/runs/both.svg" | sed 's/.*>//' | tr '\n' '|')" \
	"a loss |a eval_loss |b loss |b eval_loss |" "legend: run and key for each series"
colour() { grep -o "data-run=\"$1\"[^>]*stroke=\"[^\"]*\"" "$T/runs/both.svg" | grep -o 'stroke="[^"]*"' | sort -u; }
is "$(colour a | wc -l)" 1 "run a in one colour"
ok "one colour per run" test "$(colour a)" != "$(colour b)"
is "$(grep -c 'class="panel"' "$T/runs/both.svg")" 3 "main panel and two more"
like "$T/runs/both.svg" 'class="ylabel"[^>]*>learning rate<' "lr panel labelled"
like "$T/runs/both.svg" 'class="ylabel"[^>]*>throughput \(tokens/s\)<' "tokens/s panel labelled"
like "$T/runs/both.svg" 'height="700"' "taller by a panel each"

mkdir "$T/r1" "$T/r2"
cp "$T/a.jsonl" "$T/r1/log.jsonl"; cp "$T/b.jsonl" "$T/r2/log.jsonl"
run loom-plot -q "$T/r1/log.jsonl" "$T/r2/log.jsonl" --ylabel 'cross-entropy' -o "$T/same.svg"
like "$T/same.svg" "data-run=\"$T/r1/log\"" "same file names: runs named by path"
like "$T/same.svg" 'class="ylabel"[^>]*>cross-entropy<' "--ylabel"
no_tmp_left "$T" "no temporary file left"

run loom-plot -y loss,nosuchkey "$T/log.jsonl" -o "$T/one.svg"
is_rc 0 "a key without points next to one with points"
is "$(grep -c 'class="raw"' "$T/one.svg")" 1 "no line for the empty series"
unlike "$T/one.svg" 'nosuchkey' "and no legend entry"

run loom-plot -y lr --spark 5 < "$T/log.jsonl"
is_rc 0 "stdin, other key"
is "$(grep -o '▄' "$out" | wc -l)" 5 "sparkline resampled to 5 cells (constant series)"

printf '{"step":1,"loss":3}\n{"step":2,"loss":' > "$T/partial.jsonl"
run loom-plot "$T/partial.jsonl"
is_rc 0 "a log being written: incomplete last line tolerated"
like "$err" "partial.jsonl: line 2: incomplete last line ignored" "and reported"

printf '{"step":1,"loss":3}\nnot json\n{"step":3,"loss":1}\n' > "$T/bad.jsonl"
run loom-plot "$T/bad.jsonl" -o "$T/bad.svg"
is_rc 1 "malformed line fails"
like "$err" "^loom-plot: .*bad.jsonl: line 2: column" "error names file, line, column"
ok "no chart written on error" test ! -e "$T/bad.svg"

# extreme values: a chart and a sparkline, not a crash (+-1e308 indexed the
# bar table with INT_MIN), every coordinate a number, an SVG that parses
parses() { /usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$1"; }
printf '{"step":1,"loss":1e308}\n{"step":2,"loss":-1e308}\n' > "$T/big.jsonl"
printf '{"step":1.7976931348623157e308,"loss":1.7976931348623157e308,"lr":1}\n{"step":-1.7976931348623157e308,"loss":-1.7976931348623157e308,"lr":1.7976931348623157e308}\n{"step":1,"eval_loss":1.7976931348623157e308}\n' > "$T/max.jsonl"
printf '{"step":9223372036854775807,"loss":5e-324}\n{"step":-9223372036854775807,"loss":-0.0}\n{"step":0,"loss":1e-323}\n' > "$T/tiny.jsonl"
printf '{"step":7,"loss":2.5}\n' > "$T/one.jsonl"
printf '{"step":1,"loss":2}\n{"step":2,"loss":2}\n{"step":3,"loss":2}\n' > "$T/flat.jsonl"
bad=
for f in big max tiny one flat; do
	for o in "" --logy "--panels --smooth 0.9" "--smooth 0 --width 100 --height 100"; do
		rm -f "$T/x.svg"
		run loom-plot $o "$T/$f.jsonl" -o "$T/x.svg"
		[ "$rc" = 0 ] || bad="$bad $f[$o]:rc=$rc"
		[ ! -s "$err" ] || bad="$bad $f[$o]:stderr"
		! grep -Eq '="[^"]*(nan|inf)' "$T/x.svg" || bad="$bad $f[$o]:nan-or-inf"
		parses "$T/x.svg" || bad="$bad $f[$o]:not-XML"
	done
done
is "$bad" "" "+-1e308, +-DBL_MAX, int64 steps, denormals, -0, one point, all equal: charts"
run loom-plot "$T/big.jsonl"
is "$(cat "$out")" "loss         1e+308 █▁ -1e+308  min -1e+308  (2 points, step 1..2)" "+-1e308: the top bar, the bottom bar"
run loom-plot "$T/flat.jsonl"
like "$out" ' ▄▄▄ ' "all equal: middle bars"
printf '{"step":1,"loss":1e400}\n' > "$T/over.jsonl"
run loom-plot "$T/over.jsonl"
is_rc 1 "a number beyond a double: an error"
like "$err" '^loom-plot: .*over.jsonl: line 1: column [0-9]+: real number overflow' "  naming file, line and column"

# a title the XML cannot hold as is: control characters, invalid UTF-8, ]]>
run loom-plot -q "$T/log.jsonl" -o "$T/title.svg" --title "$(printf 'a\001\033[1m<b>&"c'"'"']]>\377\355\240\200 z\303\251')"
is_rc 0 "a title with control characters and invalid UTF-8"
ok "  the SVG parses (python3 xml.etree)" parses "$T/title.svg"
is "$(/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E
print([t.text for t in E.parse(sys.argv[1]).iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "title"][0])' "$T/title.svg")" \
	"a��[1m<b>&\"c']]>���� zé" "  and reads back, U+FFFD for what XML cannot hold"
cp "$T/log.jsonl" "$T/$(printf 'r\001un]]>&.jsonl')"
run loom-plot -q "$T/log.jsonl" "$T/$(printf 'r\001un]]>&.jsonl')" -o "$T/names.svg"
ok "a run named by a file name with a control character: the SVG parses" parses "$T/names.svg"

run loom-plot -y nosuchkey "$T/log.jsonl"
is_rc 1 "no points"
like "$err" "no points" "says why"

run loom-plot "$T/missing.jsonl"
is_rc 1 "missing file"
like "$err" "cannot open '.*missing.jsonl': No such file" "names the file"

run loom-plot --width 5 "$T/log.jsonl"
is_rc 2 "bad option value is a usage error"
like "$err" "^loom-plot: --width: '5' is out of range" "one line naming the option"
is "$(sed -n 2p "$err")" "Try 'loom-plot --help' for more information." "followed by the hint"

run loom-plot --help
is_rc 0 "--help exits 0"
like "$out" "^usage: loom-plot" "--help on stdout"
run loom-plot --version
like "$out" "^loom-plot \(loom [0-9.]+\)" "--version"
done_testing
