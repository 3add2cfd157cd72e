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
like "$T/chart.svg" '<polyline' "a line per series"
is "$(grep -c '<polyline' "$T/chart.svg")" 2 "two series"
no_tmp_left "$T" "no temporary file left"

run loom-plot -y loss,nosuchkey "$T/log.jsonl" -o "$T/one.svg"
is_rc 0 "a key without points next to one with points"
is "$(grep -c '<polyline' "$T/one.svg")" 1 "no line for the empty series"
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

run loom-plot -y nosuchkey "$T/log.jsonl"
is_rc 1 "no points"
like "$err" "no points" "says why"

run loom-plot "$T/missing.jsonl"
is_rc 1 "missing file"
like "$err" "cannot open '.*missing.jsonl': No such file" "names the file"

run loom-plot --width 5 "$T/log.jsonl"
is_rc 2 "bad option value is a usage error"
like "$err" "^loom-plot: --width: '5' is out of range" "one line naming the option"
like "$err" "^usage: loom-plot" "followed by usage"

run loom-plot --help
is_rc 0 "--help exits 0"
like "$out" "^usage: loom-plot" "--help on stdout"
run loom-plot --version
like "$out" "^loom-plot \(loom [0-9.]+\)" "--version"
done_testing
