"""Print a TensorBoard event file, one line per value, decoded with the
standard library only (share/python/loom_data.py's TFRecord reader, which
checks both CRCs of every record, and its protobuf field walker):

  version brain.Event:2 WALL_TIME     the file_version event
  STEP TAG scalar VALUE               Summary.Value.simple_value
  STEP TAG text PLUGIN DTYPE TEXT     a string tensor (newlines as \\n)

Field numbers: formats/tensorboard.md (TensorFlow's event.proto,
summary.proto, tensor.proto)."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "share", "python"))
from loom_data import read_tfrecord, _fields  # noqa: E402


def value(step, b):
    tag, out, plugin, texts, dtype = "", None, "", None, 0
    for fn, wt, v in _fields(b):
        if fn == 1:
            tag = v.decode()
        elif fn == 2 and wt == 5:
            out = "scalar %.9g" % struct.unpack("<f", v)[0]
        elif fn == 9:  # metadata.plugin_data.plugin_name
            for mf, _, mv in _fields(v):
                if mf == 1:
                    plugin = {pf: pv for pf, _, pv in _fields(mv)}.get(1, b"").decode()
        elif fn == 8:
            texts = []
            for tf, _, tv in _fields(v):
                if tf == 1:
                    dtype = tv
                elif tf == 8:
                    texts.append(tv.decode().replace("\n", "\\n"))
    if texts is not None:
        out = "text %s %d %s" % (plugin, dtype, "|".join(texts))
    return "%d %s %s" % (step, tag, out)


for payload in read_tfrecord(sys.argv[1]):
    wall, step, lines = 0.0, 0, []
    for fn, wt, v in _fields(payload):
        if fn == 1:
            wall = struct.unpack("<d", v)[0]
        elif fn == 2:
            step = v
        elif fn == 3:
            lines.append("version %s %.3f" % (v.decode(), wall))
        elif fn == 5:
            lines += [value(step, sv) for sf, _, sv in _fields(v) if sf == 1]
    print("\n".join(lines))
