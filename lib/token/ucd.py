"""Readers of the Unicode Character Database files (Debian package
unicode-data: /usr/share/unicode), shared by lib/token/gen_unicode_tab.py and
lib/token/gen_wordpiece_tab.py."""
import os

N = 0x110000


def unicode_data(ucd):
    """UnicodeData.txt: (general category of every code point, "Cn" where
    unassigned; {cp: fields} of the listed code points (ranges excluded))."""
    gc = ["Cn"] * N
    fields_of = {}
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
            fields_of[cp] = fl
    return gc, fields_of


def ranges(ucd, name, want):
    """Code points of a "RANGE ; VALUE" file (PropList.txt, DerivedAge.txt)
    as {cp: value}, for the values `want` accepts; and the file's version
    (from its "# NAME-X.Y.Z.txt" first line)."""
    out, version = {}, "?"
    stem = os.path.splitext(name)[0]
    with open(os.path.join(ucd, name), encoding="utf-8") as f:
        for line in f:
            if line.startswith("# %s-" % stem):
                version = line[len("# %s-" % stem):].strip().removesuffix(".txt")
            line = line.split("#")[0].strip()
            if not line:
                continue
            rng, value = [x.strip() for x in line.split(";")]
            if not want(value):
                continue
            lo, _, hi = rng.partition("..")
            lo = int(lo, 16)
            for x in range(lo, (int(hi, 16) if hi else lo) + 1):
                out[x] = value
    return out, version


def two_stage(block_bytes):
    """The two-stage table of the generated C files: stage1 (for each block
    of 256 code points, the index of its contents among the distinct ones)
    and those distinct blocks; block_bytes(b) gives block b's bytes."""
    blocks, index, stage1 = [], {}, []
    for b in range(N // 256):
        key = block_bytes(b)
        if key not in index:
            index[key] = len(blocks)
            blocks.append(key)
        stage1.append(index[key])
    assert len(blocks) < 256
    return stage1, blocks


def write_stage1(out, name, stage1):
    """The C array `const uint8_t NAME[]` of stage1, 16 values a line."""
    out.write("const uint8_t %s[%d] = {\n" % (name, len(stage1)))
    for i in range(0, len(stage1), 16):
        out.write("\t" + ", ".join("%d" % x for x in stage1[i:i + 16]) + ",\n")
    out.write("};\n\n")
