#include <ctype.h>
#include <string.h>
#include "wordstat.h"

static char current[256];
static size_t current_len;

void wordstat_init(struct wordstat *ws) {
    ws->lines = 0;
    ws->words = 0;
    ws->longest[0] = '\0';
    current_len = 0;
}

static void end_word(struct wordstat *ws) {
    if (current_len == 0)
        return;
    current[current_len] = '\0';
    ws->words++;
    if (current_len > strlen(ws->longest))
        strcpy(ws->longest, current);
    current_len = 0;
}

void wordstat_feed(struct wordstat *ws, const char *text, size_t len) {
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == '\n')
            ws->lines++;
        if (isspace((unsigned char)c))
            end_word(ws);
        else if (current_len < sizeof current - 1)
            current[current_len++] = c;
    }
}

void wordstat_finish(struct wordstat *ws) {
    end_word(ws);
}
