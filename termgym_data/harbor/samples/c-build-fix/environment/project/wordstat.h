#ifndef WORDSTAT_H
#define WORDSTAT_H

#include <stddef.h>

struct wordstat {
    long lines;
    long words;
    char longest[256];
};

void wordstat_init(struct wordstat *ws);
void wordstat_feed(struct wordstat *ws, const char *text, size_t len);

#endif
