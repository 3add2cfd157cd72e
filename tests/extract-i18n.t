#!/usr/bin/env bash
# loom-extract on non-English wikis: file and category links under the
# dump's own namespace names (<siteinfo><namespaces>) and the well-known
# aliases (share/wiki/namespaces.tsv: German Bild: for Datei:, File:/Image:
# everywhere) are dropped like [[File:]] / [[Category:]]; disambiguation
# pages are recognised by __DISAMBIG__, the language's templates and title
# suffixes (share/wiki/disambiguation.tsv).  German and Japanese samples.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1

page() { # id title text
	printf '  <page>\n    <title>%s</title>\n    <ns>0</ns>\n    <id>%s</id>\n' "$2" "$1"
	printf '    <revision>\n      <id>%s</id>\n      <text xml:space="preserve">%s</text>\n    </revision>\n  </page>\n' \
		"$((1000 + $1))" "$3"
}
site() { # dbname lang file-name category-name media-name
	printf '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="%s">\n' "$2"
	printf '  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <dbname>%s</dbname>\n' "$1"
	printf '    <base>https://%s.wikipedia.org/wiki/Main</base>\n    <case>first-letter</case>\n' "$2"
	printf '    <namespaces>\n      <namespace key="-2" case="first-letter">%s</namespace>\n' "$5"
	printf '      <namespace key="0" case="first-letter" />\n'
	printf '      <namespace key="6" case="first-letter">%s</namespace>\n' "$3"
	printf '      <namespace key="14" case="first-letter">%s</namespace>\n    </namespaces>\n  </siteinfo>\n' "$4"
}

{
	site dewiki de Datei Kategorie Medium
	page 1 Berlin "'''Berlin''' ist die Hauptstadt [[Deutschland]]s.
[[Datei:Berlin Skyline.jpg|mini|Die Skyline]]
[[Bild:Brandenburger Tor.jpg|mini|links|Das Tor]]
[[File:Fernsehturm.jpg|mini|Der Turm]]
[[Image:Alt.png|mini]]
[[Medium:Hymne.ogg|Hymne]]
Die Stadt hat [[Einwohner|viele Einwohner]].
[[Kategorie:Hauptstadt in Europa]]
[[Category:Ort in Berlin]]"
	page 2 "Bank (Begriffsklärung)" "'''Bank''' steht für:
* [[Bank (Möbel)]], eine Sitzgelegenheit
* [[Kreditinstitut]]
{{Begriffsklärung}}"
	page 3 Tor "'''Tor''' steht für:
* [[Tor (Architektur)]]
* [[Tor (Sport)]]
__DISAMBIG__"
	page 4 Ball "'''Ball''' bezeichnet:
* [[Ball (Sportgerät)]]
* [[Ball (Tanz)]]
{{begriffsklärung}}"
	page 5 Spree "Die '''Spree''' ist ein Fluss in [[Brandenburg]] und Berlin."
	printf '</mediawiki>\n'
} > dewiki.xml

{
	site jawiki ja ファイル Category メディア
	page 1 東京都 "'''東京都'''は[[日本]]の首都である。
[[ファイル:Tokyo Tower.jpg|thumb|東京タワー]]
[[画像:Skytree.jpg|thumb|スカイツリー]]
[[File:Shibuya.jpg|thumb]]
人口は約1400万人。
[[Category:日本の都道府県]]
[[カテゴリ:関東地方]]"
	page 2 "橋 (曖昧さ回避)" "'''橋'''
* [[橋]]
* [[橋 (姓)]]
{{aimai}}"
	page 3 "山田" "'''山田'''は日本人の姓。
* [[山田太郎]]
{{人名の曖昧さ回避}}"
	page 4 "富士山" "'''富士山'''は[[静岡県]]と[[山梨県]]にまたがる山。"
	printf '</mediawiki>\n'
} > jawiki.xml

# --- German ----------------------------------------------------------------
run loom-extract --format jsonl dewiki.xml
is_rc 0 "German dump: exit 0"
berlin=$(grep '"title": *"Berlin"' "$out")
ok "  Berlin extracted" test -n "$berlin"
for w in Skyline "Das Tor" "Der Turm" Alt.png Hymne "in Europa" "Ort in Berlin" Datei Bild: Kategorie; do
	case "$berlin" in *"$w"*) _report 0 "  no trace of '$w' (file, image, media, category links dropped)";;
	*) _report 1 "  no trace of '$w' (file, image, media, category links dropped)";; esac
done
like "$out" '"text": *"Berlin ist die Hauptstadt Deutschlands\.\\nDie Stadt hat viele Einwohner\."' \
	"  the article text is what remains"
like "$err" '5 pages seen, 5 articles written, .* 3 disambiguation, ' \
	"  3 disambiguation pages counted (template, __DISAMBIG__, lower-case template), kept"
unlike "$out" '__DISAMBIG__' "  the magic word is not in the text"

run loom-extract --skip-disambiguation dewiki.xml
is_rc 0 "--skip-disambiguation"
is "$(cut -c1-12 "$out" | tr '\n' '|')" "Berlin ist d|Die Spree is|" "  only the two articles remain"
like "$err" '2 articles written, .* 3 disambiguation skipped' "  3 skipped"

# a title suffix alone marks one (no template)
{ site dewiki de Datei Kategorie Medium
  page 7 "Schloss (Begriffsklärung)" "'''Schloss''' steht für ein Gebäude oder ein Türschloss."
  printf '</mediawiki>\n'; } > detitle.xml
run loom-extract --skip-disambiguation detitle.xml
like "$err" '0 articles written, .* 1 disambiguation skipped' "German title suffix (Begriffsklärung)"

# --- Japanese -----------------------------------------------------------------
run loom-extract --format jsonl jawiki.xml
is_rc 0 "Japanese dump: exit 0"
tokyo=$(grep '東京都は' "$out")
ok "  東京都 extracted" test -n "$tokyo"
for w in 東京タワー スカイツリー Shibuya 都道府県 関東地方 ファイル 画像; do
	case "$tokyo" in *"$w"*) _report 0 "  no trace of '$w'";; *) _report 1 "  no trace of '$w'";; esac
done
like "$out" '"text": *"東京都は日本の首都である。\\n人口は約1400万人。"' "  the article text is what remains"
like "$err" '4 pages seen, 4 articles written, .* 2 disambiguation, ' \
	"  {{aimai}}, {{人名の曖昧さ回避}} and the title (曖昧さ回避): 2 pages"
run loom-extract --skip-disambiguation jawiki.xml
is "$(cut -c1-9 "$out" | tr '\n' '|')" "東京都|富士山|" "  --skip-disambiguation keeps the two articles"

# --- French and Spanish templates, from the table -------------------------------
for lw in "fr Homonymie Fichier Catégorie" "es Desambiguación Archivo Categoría"; do
	set -- $lw
	{ site "${1}wiki" "$1" "$3" "$4" Media
	  page 1 Mercure "'''Mercure''' peut désigner : [[$3:X.jpg|vignette|légende]]
* [[Mercure (planète)]]
{{$2}}"
	  page 2 Paris "'''Paris''' est une ville.[[$4:Ville]]"
	  printf '</mediawiki>\n'; } > "$1.xml"
	run loom-extract --skip-disambiguation "$1.xml"
	is "$(cat "$out")" "Paris est une ville." "$1: {{$2}} marks a disambiguation page; [[$4:...]] dropped"
done

# a broken table is named
mkdir share && cp -r "$SHARE"/* share/ 2>/dev/null
printf 'de\tsometimes\tX\n' >> share/wiki/disambiguation.tsv
rc=0; LOOM_SHARE="$T/share" loom-extract dewiki.xml >"$out" 2>"$err" || rc=$?
is_rc 1 "a malformed share/wiki/disambiguation.tsv: exit 1"
like "$err" "disambiguation.tsv line [0-9]+: 'sometimes' is not template or title" "  names the file, line and field"

done_testing
