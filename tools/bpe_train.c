/* bpe_train.c - `loom-bpe train`: learn byte-level BPE merges (see bpe_train.h) */
#include "bpe_train.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "loom_common.h"

static const char train_usage[] =
"usage: loom-bpe train --vocab-size N -o DIR [options] [FILE...]\n"
"Learn byte-level BPE merges (GPT-2 pre-tokenization) from FILEs or stdin and\n"
"write DIR/encoder.json, DIR/vocab.bpe and DIR/tokenizer.json.\n"
"  -n, --vocab-size N      vocabulary size: 256 bytes + merges + specials\n"
"  -m, --min-frequency N   stop when the best pair occurs fewer than N times (2)\n"
"  -s, --special TOKEN     add a special token after the merges (repeatable;\n"
"                          default <|endoftext|>; --special '' adds none)\n"
"  -d, --docs MODE         lines (one document per line, default), nul, whole\n"
"  -o, --output DIR        output directory (created if missing)\n"
"      --progress          progress on stderr even when it is not a terminal\n"
"  -q, --quiet             no summary on stderr\n"
"  -h, --help              this help;  --version  versions\n";

int bpe_train_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "vocab-size", required_argument, NULL, 'n' },
		{ "min-frequency", required_argument, NULL, 'm' },
		{ "special", required_argument, NULL, 's' },
		{ "docs", required_argument, NULL, 'd' },
		{ "output", required_argument, NULL, 'o' },
		{ "progress", no_argument, NULL, 'P' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t vocab_size = 0;
	const char *outdir = NULL;
	int c;

	cli_init(cli_prog, train_usage);
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:m:s:d:o:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			vocab_size = cli_u64("--vocab-size", optarg, 1, 1u << 30);
			break;
		case 'm':
			cli_u64("--min-frequency", optarg, 0, UINT64_MAX);
			break;
		case 's':
		case 'd':
		case 'P':
		case 'q':
			break;
		case 'o':
			outdir = optarg;
			break;
		case 'h':
			cli_help();
		case 'V':
			cli_version(NULL);
		default:
			cli_bad_option();
		}
	}
	if (!vocab_size)
		cli_usage_error("train: --vocab-size is required");
	if (!outdir)
		cli_usage_error("train: -o DIR is required");
	cli_die("train: not implemented yet");
}
