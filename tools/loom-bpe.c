/* loom-bpe - byte-level BPE, exactly GPT-2's, and BERT's WordPiece:
 * encode | decode | train.  This file is the command table; each
 * subcommand is a file of its own (tools/bpe_encode.c, bpe_decode.c,
 * bpe_train.c), what they share is tools/bpe_common.c (tools/bpe.h). */
#include <string.h>

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

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{ "encode", bpe_encode_main },
	{ "decode", bpe_decode_main },
	{ "train", bpe_train_main },
};

int main(int argc, char **argv)
{
	cli_init("loom-bpe", usage_main);
	if (argc < 2)
		cli_usage_error("missing command (encode, decode or train)");
	const char *cmd = argv[1];
	for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
		if (!strcmp(cmd, commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help"))
		cli_help();
	if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version"))
		cli_version(bpe_versions());
	cli_usage_error("unknown command '%s' (encode, decode or train)", cmd);
}
