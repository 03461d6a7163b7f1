/* Python's character classes on ASCII, shared by the kernels that read text as its regexes do
 * (`_volatile.c`, `_sketching.c`): there `\d`, `\w`, `\s` and `str.isspace()` mean exactly these. */
#ifndef RUNGUARD_ASCII_H
#define RUNGUARD_ASCII_H

static inline int is_digit(int c) { return c >= '0' && c <= '9'; } /* \d */

static inline int is_word(int c) { /* \w */
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static inline int is_space(int c) { /* \s, str.isspace(), str.split() */
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

#endif
