"""The volatile-text regex of `normalize` in C (`_volatile.c`): None for a text with a character beyond ASCII
that the pattern reads (a letter, a digit or a space of another script)."""

def strip(text: str, /) -> str | None: ...
