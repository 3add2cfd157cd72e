/* loom-bpe - byte-level BPE, exactly GPT-2's, and BERT's WordPiece:
 * encode | decode | train.  This file is the command table; each
 * subcommand is a file of its own (tools/bpe_encode.c, bpe_decode.c,
 * bpe_train.c), what they share is tools/bpe_common.c (tools/bpe.h). */
#include "bpe.h"
#include "cli.h"

static const char usage_main[] =
"usage: loom-bpe encode|decode|train [options] [FILE...]\n"
"Byte-level BPE tokenizer, exactly GPT-2's (tiktoken / HuggingFace ids),\n"
"and BERT's WordPiece (HuggingFace's BertTokenizerFast ids) to encode and decode.\n"
"  encode   text documents -> token ids       (loom-bpe encode --help)\n"
"  decode   token ids -> text                 (loom-bpe decode --help)\n"
"  train    learn a vocabulary from text      (loom-bpe train --help)\n"
"  -h, --help      this help;   -V, --version   versions\n";

int main(int argc, char **argv)
{
	static const struct cli_subcmd cmds[] = {
		{ "encode", NULL, bpe_encode_main },
		{ "decode", NULL, bpe_decode_main },
		{ "train", NULL, bpe_train_main },
		{ NULL, NULL, NULL },
	};
	static const struct cli_cmds t = { "loom-bpe", usage_main, cmds, NULL, bpe_versions };
	return cli_dispatch(&t, argc, argv);
}
