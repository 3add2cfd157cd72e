#!/usr/bin/env python3
"""Generate lib/token/loom_wordpiece_tab.c: the character data of BERT's
normalizer and pre-tokenizer (HuggingFace BertNormalizer, BertPreTokenizer;
see lib/token/loom_wordpiece.h) for every code point.

Flags (one byte per code point, two-stage table):
  WS    White_Space (PropList.txt): Rust's char::is_whitespace
  CTRL  General_Category Cc Cf Co Cs, except TAB LF CR (HF's is_control)
  PUNCT General_Category Pc Pd Pe Pf Pi Po Ps, or ASCII punctuation
        (these categories, and Mn below, as of Unicode 8.0: see GC8_CHANGED)
  CJK   the CJK ideograph blocks of BERT's _is_chinese_char
  STRIP the character changes under NFD with Mn marks removed
  LOWER the character changes under char::to_lowercase
  CASED, CASE_IGNORABLE  DerivedCoreProperties.txt's Cased and
        Case_Ignorable (for Python's final sigma rule in lib/data/loom_squad.c)
Maps (sorted by code point, each entry an offset and length into a pool):
  strip: NFD (canonical decomposition, applied recursively) without the
         General_Category Mn characters (of Unicode 8.0); Hangul syllables are decomposed
         by the algorithm in lib/token/loom_wordpiece.c, not listed here
  lower: UnicodeData.txt simple lowercase, or SpecialCasing.txt's
         unconditional lowercase where it has one (U+0130 -> 0069 0307)

Usage: python3 lib/token/gen_wordpiece_tab.py [UCD_DIR] > lib/token/loom_wordpiece_tab.c
UCD_DIR defaults to /usr/share/unicode (Debian package unicode-data, 15.0.0)."""
import os
import sys

ucd = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
N = 0x110000
WS, CTRL, PUNCT, CJK, STRIP, LOWER, CASED, CASE_IGNORABLE = 1, 2, 4, 8, 16, 32, 64, 128

gc = ["Cn"] * N
decomp = {}
lower = {}
with open(os.path.join(ucd, "UnicodeData.txt"), encoding="utf-8") as f:
    first = None
    for line in f:
        fl = line.rstrip("\n").split(";")
        cp = int(fl[0], 16)
        if fl[1].endswith(", First>"):
            first = cp
            continue
        if fl[1].endswith(", Last>"):
            for x in range(first, cp + 1):
                gc[x] = fl[2]
            continue
        gc[cp] = fl[2]
        if fl[5] and not fl[5].startswith("<"):
            decomp[cp] = [int(x, 16) for x in fl[5].split()]
        if fl[13]:
            lower[cp] = [int(fl[13], 16)]

with open(os.path.join(ucd, "SpecialCasing.txt"), encoding="utf-8") as f:
    for line in f:
        line = line.split("#")[0].strip()
        if not line:
            continue
        fl = [x.strip() for x in line.split(";")]
        if len(fl) > 4 and fl[4]:  # a condition (Final_Sigma, a language): skip
            continue
        cp = int(fl[0], 16)
        low = [int(x, 16) for x in fl[1].split()]
        if low != [cp]:
            lower[cp] = low

def ucd_props(name):
    """(code point, value) for each line "RANGE ; VALUE" of a UCD file."""
    with open(os.path.join(ucd, name), encoding="utf-8") as f:
        for line in f:
            line = line.split("#")[0].strip()
            if not line:
                continue
            rng, val = [x.strip() for x in line.split(";")]
            lo, _, hi = rng.partition("..")
            lo = int(lo, 16)
            for x in range(lo, (int(hi, 16) if hi else lo) + 1):
                yield x, val


with open(os.path.join(ucd, "PropList.txt"), encoding="utf-8") as f:
    version = f.readline().strip().removeprefix("# PropList-").removesuffix(".txt")
ws = {x for x, prop in ucd_props("PropList.txt") if prop == "White_Space"}
core = {"Cased": set(), "Case_Ignorable": set()}
for x, prop in ucd_props("DerivedCoreProperties.txt"):
    if prop in core:
        core[prop].add(x)

CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
              (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF),
              (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


# HuggingFace takes the categories of CTRL, PUNCT and the Mn marks from the
# unicode_categories crate, whose tables are Unicode 8.0's: a character
# assigned later is unassigned (Cn) there, and these six have changed
# category since (verified against tokenizers on every code point).
age = {x: tuple(int(y) for y in a.split(".")) for x, a in ucd_props("DerivedAge.txt")}
GC8_CHANGED = {0x1885: "Lo", 0x1886: "Lo", 0x166D: "Po", 0x1734: "Mn", 0xA9BD: "Mc",
               0x111C9: "Po"}
gc8 = [GC8_CHANGED.get(cp, gc[cp] if age.get(cp, (99,)) <= (8, 0) else "Cn")
       for cp in range(N)]


def nfd(cp):
    if cp in decomp:
        return [y for x in decomp[cp] for y in nfd(x)]
    return [cp]


def is_hangul(cp):
    return 0xAC00 <= cp <= 0xD7A3


flags = bytearray(N)
strip_map, lower_map = {}, {}
for cp in range(N):
    f = 0
    if cp in ws:
        f |= WS
    if gc8[cp] in ("Cc", "Cf", "Co", "Cs") and cp not in (9, 10, 13):
        f |= CTRL
    if gc8[cp][0] == "P" or (cp < 128 and chr(cp) in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"):
        f |= PUNCT
    if any(lo <= cp <= hi for lo, hi in CJK_RANGES):
        f |= CJK
    if is_hangul(cp):
        f |= STRIP
    else:
        s = [x for x in nfd(cp) if gc8[x] != "Mn"]
        if s != [cp]:
            f |= STRIP
            strip_map[cp] = s
    if cp in lower and lower[cp] != [cp]:
        f |= LOWER
        lower_map[cp] = lower[cp]
    if cp in core["Cased"]:
        f |= CASED
    if cp in core["Case_Ignorable"]:
        f |= CASE_IGNORABLE
    flags[cp] = f

blocks, index, stage1 = [], {}, []
for b in range(N // 256):
    key = bytes(flags[b * 256:(b + 1) * 256])
    if key not in index:
        index[key] = len(blocks)
        blocks.append(key)
    stage1.append(index[key])
assert len(blocks) < 256

out = sys.stdout
out.write("/* Generated by lib/token/gen_wordpiece_tab.py from Unicode %s data "
          "(UnicodeData.txt,\n * PropList.txt, SpecialCasing.txt, DerivedAge.txt): do not edit.  "
          "See lib/token/loom_wordpiece.h. */\n" % version)
out.write('#include <stdint.h>\n\n#include "loom_wordpiece_tab.h"\n\n')
out.write("const uint8_t loom_wp_stage1[%d] = {\n" % len(stage1))
for i in range(0, len(stage1), 16):
    out.write("\t" + ", ".join("%d" % x for x in stage1[i:i + 16]) + ",\n")
out.write("};\n\n")
out.write("const uint8_t loom_wp_stage2[%d][256] = {\n" % len(blocks))
for blk in blocks:
    out.write("\t{")
    out.write(",".join("%d" % x for x in blk))
    out.write("},\n")
out.write("};\n\n")

for name, m in (("strip", strip_map), ("lower", lower_map)):
    pool = []
    ents = []
    for cp in sorted(m):
        ents.append((cp, len(pool), len(m[cp])))
        pool.extend(m[cp])
    assert len(pool) < 65536 and all(n < 256 for _, _, n in ents)
    out.write("const uint32_t loom_wp_%s_pool[%d] = {\n" % (name, len(pool)))
    for i in range(0, len(pool), 12):
        out.write("\t" + ", ".join("0x%04x" % x for x in pool[i:i + 12]) + ",\n")
    out.write("};\n\n")
    out.write("const struct loom_wp_map loom_wp_%s[%d] = {\n" % (name, len(ents)))
    for cp, off, n in ents:
        out.write("\t{0x%04x, %d, %d},\n" % (cp, off, n))
    out.write("};\n")
    out.write("const uint32_t loom_wp_%s_n = %d;\n\n" % (name, len(ents)))
