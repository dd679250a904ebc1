#include <stdio.h>
#include "wordstat.h"

int main(void) {
    struct wordstat ws;
    char buf[4096];
    size_t n;
    wordstat_init(&ws);
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0)
        wordstat_feed(&ws, buf, n);
    wordstat_finish(&ws);
    printf("lines %ld\nwords %ld\nlongest %s\n", ws.lines, ws.words, ws.longest);
    return 0;
}
