#!/usr/bin/env python3
"""Generate tests/data/bpe-regress.txt: varied synthetic text (English,
Japanese, other scripts, numbers, markup, odd white space, emoji, rare
code points) for loom-bpe's regression test.  Deterministic (seeded); the
word lists below are written for loom.  Documents are separated by
"\\n\\x1e\\n".  The expected ids (tests/data/bpe-regress.ids, one line per
document) come from a reference encoder: tests/data/gen_bpe_regress_ids.js
(npm tiktoken 'gpt2', the Rust core as WASM).

Usage: python3 tests/data/gen_bpe_regress.py > tests/data/bpe-regress.txt"""
import random
import unicodedata
import sys

R = random.Random(20240601)

EN = """the of and to in is was for on that with as by at from his her it an
were are which this also be had has not or their first its new after who they
have but one two three been other all into more when time there she can years
would about only over most some city river station museum railway government
language village council history school university population music album
series season team league football player club war army church castle island
mountain bridge village district province century king queen empire emperor
tokenizer vocabulary pipeline shard record index checkpoint training loss
gradient optimizer batch sequence model layer attention embedding parameter
quick brown fox jumps lazy dog zebra quixotic jazz vexing wizard sphinx
naïve café résumé coöperate façade jalapeño Zürich Ångström São Paulo""".split()

CAP = """London Paris Tokyo Kyoto Osaka Berlin Madrid Rome Lisbon Cairo Lagos
Nairobi Delhi Mumbai Beijing Shanghai Seoul Sydney Toronto Chicago Boston Texas
Alice Bob Carol Dave Eve Mallory Trent Victor Walter Peggy OpenAI Wikipedia
January February March April May June July August September October November
December Monday Tuesday NASA UNESCO GPT BPE JSON XML HTTP URL ISBN DNA""".split()

JA = """日本 東京 大阪 京都 北海道 沖縄 歴史 文化 言語 鉄道 駅 川 山 島 城 寺
神社 大学 学校 政府 議会 人口 音楽 映画 小説 作家 選手 試合 優勝 世界 戦争
時代 江戸 明治 大正 昭和 平成 令和 天皇 将軍 技術 研究 開発 計算機 人工知能
トークナイザー コンピュータ ソフトウェア インターネット ウィキペディア データ
モデル 学習 評価 プログラム サーバー ネットワーク ラーメン すし てんぷら
さくら ひらがな カタカナ 漢字 ｶﾀｶﾅ ＡＢＣ １２３""".split()

JA_PART = "は が を に で と の も へ から まで より".split()
JA_END = ["です。", "でした。", "である。", "だ。", "ます。", "ました。",
          "されている。", "と呼ばれる。", "とされる。", "か？", "！", "…", "。"]

OTHER = """Ελληνικά γλώσσα Αθήνα русский язык Москва Україна Київ עברית
ירושלים العربية القاهرة فارسی हिन्दी भाषा বাংলা ไทย ภาษา 한국어 서울 대한민국
Tiếng Việt Hà Nội Türkçe İstanbul Polski Łódź Čeština Škoda Ísland Þingvellir
ქართული Հայերեն አማርኛ ᏣᎳᎩ ᚠᚢᚦᚨᚱ 𐌰𐌱𐌲 中文 汉字 漢字""".split()

EMOJI = ["😀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "❤️", "🤖", "✨", "🎉", "☃", "⚡",
         "🏳️‍🌈", "🧑🏿‍💻", "1️⃣", "©", "™", "€", "£", "¥", "°C", "½", "²", "Ⅻ"]

PUNCT = list(".,;:!?") + ["...", "—", "–", "(", ")", "[", "]", "{", "}", "\"",
                          "'", "«", "»", "“", "”", "‘", "’", "・", "、", "。",
                          "「", "」", "『", "』", "（", "）", "%", "&", "*", "#",
                          "@", "$", "/", "\\", "|", "~", "^", "<", ">", "=",
                          "+", "-", "_", "`"]

SPACES = [" ", "  ", "   ", "\t", " \t ", "\n", "\n\n", "\r\n", "\u00a0",
          "\u3000", "\u2003", "\u0085", "\u2028", "\u000b", "\u000c",
          "\u001c", "\u200b", "\ufeff", "\u180e", "\u202f", " \n ", "    \n"]

CONTR = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve",
         "n't", "'", "''", "'''", "’s"]


def word():
    r = R.random()
    if r < 0.6:
        w = R.choice(EN)
    elif r < 0.75:
        w = R.choice(CAP)
    elif r < 0.8:
        w = R.choice(EN).upper()
    elif r < 0.85:
        w = R.choice(EN).capitalize()
    elif r < 0.9:
        w = number()
    else:
        w = R.choice(EN) + R.choice(CONTR)
    return w


def number():
    r = R.random()
    if r < 0.3:
        return str(R.randint(0, 100))
    if r < 0.5:
        return str(R.randint(1000, 2100))
    if r < 0.6:
        return "{:,}".format(R.randint(1000, 10**9))
    if r < 0.7:
        return "%.*f" % (R.randint(1, 6), R.uniform(-1000, 1000))
    if r < 0.8:
        return str(R.randint(0, 10**R.randint(5, 40)))
    if r < 0.9:
        return "%d-%02d-%02d" % (R.randint(1800, 2030), R.randint(1, 12), R.randint(1, 28))
    return R.choice(["0x1F", "1e-9", "3.14159", "٣٤٥", "१२३", "¹²³", "①②", "Ⅳ", "零"])


def en_sentence():
    n = R.randint(3, 25)
    ws = [word() for _ in range(n)]
    ws[0] = ws[0].capitalize()
    out = []
    for w in ws:
        out.append(w)
        r = R.random()
        if r < 0.08:
            out.append(R.choice(PUNCT))
        out.append(" " if R.random() < 0.95 else R.choice(SPACES))
    return "".join(out).rstrip() + R.choice([".", ".", ".", "!", "?", "...", ":", ";"])


def ja_sentence():
    out = []
    for _ in range(R.randint(2, 8)):
        out.append(R.choice(JA))
        out.append(R.choice(JA_PART))
        if R.random() < 0.1:
            out.append(R.choice(["、", "・", "「" + R.choice(JA) + "」", number(),
                                 R.choice(CAP), " "]))
    out.append(R.choice(JA))
    out.append(R.choice(JA_END))
    return "".join(out)


def rare_chars():
    """Random scalar values from many blocks (letters, marks, digits, symbols)."""
    ranges = [(0x00a0, 0x024f), (0x0300, 0x036f), (0x0370, 0x03ff), (0x0400, 0x04ff),
              (0x0590, 0x05ff), (0x0600, 0x06ff), (0x0900, 0x097f), (0x0e00, 0x0e7f),
              (0x1100, 0x11ff), (0x16a0, 0x16ff), (0x1e00, 0x1eff), (0x2000, 0x206f),
              (0x2070, 0x209f), (0x20a0, 0x20cf), (0x2100, 0x218f), (0x2190, 0x23ff),
              (0x2460, 0x24ff), (0x2e80, 0x2fdf), (0x3000, 0x30ff), (0x3190, 0x31ff),
              (0x3400, 0x4dbf), (0x4e00, 0x9fff), (0xa000, 0xa4cf), (0xac00, 0xd7a3),
              (0xf900, 0xfaff), (0xfb00, 0xfdff), (0xfe00, 0xfe6f), (0xff00, 0xffef),
              (0x10000, 0x1007f), (0x10300, 0x1034f), (0x1d400, 0x1d7ff),
              (0x1f300, 0x1faff), (0x20000, 0x2a6df), (0x31350, 0x323af),
              (0xe0000, 0xe007f), (0xf0000, 0xf00ff), (0x10fff0, 0x10ffff)]
    out = []
    for _ in range(R.randint(1, 30)):
        lo, hi = R.choice(ranges)
        cp = R.randint(lo, hi)
        # only code points assigned by Unicode 14 (Python's table), whose
        # classes are the same in Unicode 15 and the references' tables
        if unicodedata.category(chr(cp)) == "Cn":
            continue
        out.append(chr(cp))
        if R.random() < 0.3:
            out.append(R.choice(SPACES + PUNCT + ["a", "1", "'s"]))
    return "".join(out)


def markup():
    t = R.choice(EN)
    c = R.choice(CAP)
    return R.choice([
        "[[%s|%s]] and [[Category:%s]]" % (c, t, c),
        "{{cite web|url=https://example.org/%s?id=%d&lang=en|title=%s}}" % (t, R.randint(1, 999), c),
        "'''%s''' ''%s''" % (c, t),
        "== %s ==\n=== %s ===" % (c, t),
        "<ref name=\"%s\">%s, p. %d</ref>" % (t, c, R.randint(1, 500)),
        "{| class=\"wikitable\"\n|-\n! %s !! %s\n|-\n| %d || %d\n|}" % (c, t, R.randint(1, 99), R.randint(1, 99)),
        "* %s\n** %s\n# %s" % (c, t, c),
        "def %s(x):\n    return x ** %d  # %s\n" % (t, R.randint(2, 9), c),
        "if (a[i] != b[j]) { return -1; } /* %s */" % t,
        "https://%s.wikipedia.org/wiki/%s_(%s)" % (R.choice(["en", "ja", "de"]), c, t),
        "user@%s.example.com, +1-555-%04d" % (t, R.randint(0, 9999)),
        "<|endoftext|>%s<|endoftext|>" % c,
        "%s%s%s" % (R.choice(PUNCT), R.choice(PUNCT), R.choice(PUNCT)),
    ])


SOUP_SPECIAL = [0x85, 0xa0, 0x1680, 0x2000, 0x2005, 0x200a, 0x2028, 0x2029, 0x202f,
                0x205f, 0x3000, 0x180e, 0x200b, 0xfeff, 0x1c, 0x1d, 0x1e, 0x1f, 0x9,
                0xa, 0xb, 0xc, 0xd, 0x20, 0x20, 0x20, 0x27]


def soup():
    """Random characters: the class boundaries (white space that is and is not
    White_Space, marks, letters and digits of every plane) in every order."""
    out = []
    for _ in range(R.randint(1, 40)):
        r = R.random()
        if r < 0.3:
            out.append(chr(R.choice(SOUP_SPECIAL)))
        elif r < 0.6:
            out.append(chr(R.randint(0x20, 0x7e)))
        elif r < 0.7:
            out.append(R.choice(CONTR))
        else:
            while True:
                cp = R.randint(0xa0, 0x10ffff) if R.random() < 0.5 else R.randint(0xa0, 0x3000)
                if 0xd800 <= cp < 0xe000 or unicodedata.category(chr(cp)) == "Cn":
                    continue
                out.append(chr(cp))
                break
    return "".join(out)


def doc():
    parts = []
    kind = R.random()
    for _ in range(R.randint(1, 12)):
        r = R.random()
        if kind < 0.45:
            p = en_sentence() if r < 0.8 else markup() if r < 0.9 else ja_sentence()
        elif kind < 0.8:
            p = ja_sentence() if r < 0.75 else en_sentence() if r < 0.9 else markup()
        else:
            p = (rare_chars() if r < 0.4 else " ".join(R.choice(OTHER) for _ in range(R.randint(1, 8)))
                 if r < 0.6 else R.choice(EMOJI) * R.randint(1, 5) if r < 0.7 else markup()
                 if r < 0.8 else R.choice(SPACES) * R.randint(1, 6) if r < 0.9 else en_sentence())
        parts.append(p)
        parts.append(R.choice([" ", " ", " ", "\n", "\n\n", "  ", "", "\t", "\u3000"]))
    return "".join(parts)


def main():
    docs = []
    size = 0
    while size < 300_000:
        d = doc()
        if "\n\x1e\n" in d:
            continue
        docs.append(d)
        size += len(d.encode("utf-8"))
    docs += [d for d in (soup() for _ in range(1500)) if "\n\x1e\n" not in d]
    # a few long runs (long-piece path) and edge documents
    docs += ["a" * 3000, " " * 2000 + "x", "x" + "\n" * 500, "1" * 999,
             "ab" * 700, "!" * 800, "日" * 900, "😀" * 300, ""]
    sys.stdout.write("\n\x1e\n".join(docs))


main()
