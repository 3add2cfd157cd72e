# Sourced by the benchmarks (tests/bench/*.sh): one FIGURE line.
fig() { # name value target-op target unit
	local ok
	ok=$(awk -v v="$2" -v op="$3" -v t="$4" 'BEGIN { print ((op == ">=" && v >= t) || (op == "<=" && v <= t)) ? "ok" : "MISSED" }')
	printf 'FIGURE %s: %s%s (target %s %s%s) %s\n' "$1" "$2" "$5" "$3" "$4" "$5" "$ok"
}
