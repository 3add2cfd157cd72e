/* Fuzz target: the dumpstatus.json and sha1sums.txt parsers of
 * loom_dumpinfo, and date resolution over whatever they accepted.  The
 * same bytes go to both parsers (merging into one table, as loom-fetch
 * does), so a JSON seed also exercises the line parser and vice versa. */
#include <stdint.h>
#include <string.h>

#include "loom_dumpinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loom_dumpinfo d;
	char date[9];
	loom_dumpinfo_init(&d);
	loom_dumpinfo_parse_status(&d, (const char *)data, size, "fuzz.json");
	loom_dumpinfo_parse_sha1sums(&d, (const char *)data, size, "fuzz.txt");
	if (loom_dumpinfo_find_date(&d, "enwiki", "pages-articles-multistream.xml.bz2",
				    date) == 0 && strlen(date) != 8)
		__builtin_trap();
	for (size_t i = 0; i < d.n; i++)
		if (loom_dumpinfo_find(&d, d.files[i].name) != &d.files[i])
			__builtin_trap();
	loom_dumpinfo_release(&d);
	return 0;
}
