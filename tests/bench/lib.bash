# tests/bench/lib.bash - shared by the bench scripts that encode text (source
# it from the repository's root after setting SHARED and W):
#   fig ...                         tests/bench/fig.bash's FIGURE line
#   corpus MB                       path of a ~MB MB corpus of real text, built once in
#                                   $W: the Wikipedia samples of $SHARED (extracted),
#                                   then the machine's documentation; valid UTF-8, one
#                                   document per line
. tests/bench/fig.bash

corpus() { # MB -> prints the path
	local mb=$1 c="$W/corpus-$1.txt"
	if [ ! -s "$c" ]; then
		echo "building a ${mb} MB corpus in $c" >&2
		set +o pipefail # head ends the producers early
		{
			for f in "$SHARED"/data/wiki/*.xml.bz2; do
				[ -e "$f" ] || continue
				case $f in *multistream*) continue ;; esac
				if command -v loom-extract >/dev/null && loom-extract "$f" 2>/dev/null; then :
				else bzcat "$f"; fi
			done
			find /usr/share/doc /usr/share/man -name '*.gz' 2>/dev/null | sort | xargs -r zcat 2>/dev/null
			find /usr/share/perl* /usr/lib/python3* -name '*.pod' -o -name '*.py' 2>/dev/null | sort | xargs -r cat 2>/dev/null
		} | head -c $((mb * 1000000)) |
			/usr/bin/python3 -c 'import sys; sys.stdout.buffer.write(sys.stdin.buffer.read().decode("utf-8", "ignore").encode("utf-8"))' \
			> "$c.tmp"
		set -o pipefail
		mv "$c.tmp" "$c"
	fi
	echo "$c"
}
