/*
 * text.h - UTF-8 safe cutting, repair and display escaping of text that comes from
 * outside (peers, files) or is built from it. Every place that cuts text to a byte
 * limit uses these, so nothing gridnode stores or sends ends inside a character, and
 * every place that shows such text to people escapes it, so a name cannot break a log
 * line or a table row.
 */
#ifndef GRIDNODE_TEXT_H
#define GRIDNODE_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the well-formed UTF-8 sequence at s[0..n) (1-4), or 0 if it is not one
   (invalid lead or continuation byte, overlong, surrogate, above U+10FFFF, cut short). */
size_t text_seq_len(const unsigned char *s, size_t n);

/* True if s[0..n) is well-formed UTF-8. */
bool text_utf8_valid(const char *s, size_t n);

/*
 * Copies s[0..n) into dst (capacity cap >= 1), NUL-terminated, as well-formed UTF-8:
 * whole characters only (a character that does not fit is left out with all that
 * follows), every byte that is not part of a well-formed sequence becomes '?'.
 * Returns the bytes written (without the NUL). cap 0 writes nothing and returns 0.
 */
size_t text_copy(char *dst, size_t cap, const char *s, size_t n);

/*
 * Makes the NUL-terminated s well-formed UTF-8 in place, for a buffer that vsnprintf
 * may have cut: an incomplete sequence at the very end is dropped, any other invalid
 * byte becomes '?'. Returns s.
 */
char *text_fix(char *s);

/*
 * Escapes s[0..n) for one line of a log or table into dst (capacity cap >= 1),
 * NUL-terminated: backslash -> "\\", newline/tab/CR -> "\n" "\t" "\r", other C0
 * controls, DEL and bytes that are not well-formed UTF-8 -> "\xNN", C1 controls
 * (U+0080..U+009F) -> "\u0085" and the like; other characters are copied. Output is
 * cut before an escape or character that does not fit. Returns the bytes written.
 */
size_t text_escape(char *dst, size_t cap, const char *s, size_t n);

/* text_escape of a NUL-terminated string into one of a few per-thread buffers of
   256 bytes, for log arguments: valid until the 4th next call in the same thread. */
const char *text_esc(const char *s);

#endif
