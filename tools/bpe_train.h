/*
 * bpe_train.h - the `loom-bpe train` subcommand (tools/bpe_train.c).
 *
 * Called by loom-bpe's dispatcher with argv[0] == "train"; parses its own
 * options (its cli table), learns byte-level BPE merges with libloom's
 * loom_bpe_train module and writes encoder.json, vocab.bpe and
 * tokenizer.json into the output directory.  Returns the process exit code
 * (0 ok, 1 data/runtime failure, 2 usage) or exits through tools/cli.h.
 */
#ifndef LOOM_BPE_TRAIN_TOOL_H
#define LOOM_BPE_TRAIN_TOOL_H

int bpe_train_main(int argc, char **argv);

#endif
