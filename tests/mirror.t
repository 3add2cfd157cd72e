#!/usr/bin/env bash
# pipelines/mirror.sh (which make demo and the tests use) finds lighttpd in
# /usr/sbin when PATH lacks it, as a user's PATH often does.
. "$(dirname "$0")/lib.sh"
P=$TESTS/../pipelines
"$P/mirror.sh" available || skip_all "lighttpd is not installed (make deps)"
[ -x /usr/sbin/lighttpd ] || skip_all "lighttpd is not in /usr/sbin"
mkdir "$T/site"; echo hello > "$T/site/x.txt"
run env PATH=/usr/bin:/bin "$P/mirror.sh" available
is_rc 0 "available without /usr/sbin on PATH"
run env PATH=/usr/bin:/bin "$P/mirror.sh" start "$T/site" "$T/ms"
is_rc 0 "started without /usr/sbin on PATH"
like "$out" '^http://127\.0\.0\.1:[0-9]+$' "  prints its URL"
url=$(cat "$out")
is "$(/usr/bin/python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1] + "/x.txt").read().decode().strip())' "$url")" hello "  and serves the directory"
run "$P/mirror.sh" stop "$T/ms"
is_rc 0 "stopped"
done_testing
