/* text.c - UTF-8 safe cutting, repair and escaping (see text.h). */
#include "lib/text.h"

#include <stdio.h>
#include <string.h>

size_t text_seq_len(const unsigned char *p, size_t n)
{
    if (n == 0)
        return 0;
    unsigned char b = p[0];
    if (b < 0x80)
        return 1;
    size_t len = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 ? 2 : 0;
    if (len == 0 || b > 0xf4 || len > n)
        return 0;
    for (size_t k = 1; k < len; k++)
        if ((p[k] & 0xc0) != 0x80)
            return 0;
    if ((b == 0xe0 && p[1] < 0xa0) || (b == 0xed && p[1] > 0x9f) || (b == 0xf0 && p[1] < 0x90) ||
        (b == 0xf4 && p[1] > 0x8f))
        return 0;
    return len;
}

bool text_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = text_seq_len(p + i, n - i);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

size_t text_copy(char *dst, size_t cap, const char *s, size_t n)
{
    if (cap == 0)
        return 0;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, o = 0;
    while (i < n) {
        size_t k = text_seq_len(p + i, n - i);
        size_t w = k ? k : 1;
        if (o + w > cap - 1)
            break;
        if (k)
            memcpy(dst + o, p + i, k);
        else
            dst[o] = '?';
        o += w;
        i += w;
    }
    dst[o] = '\0';
    return o;
}

char *text_fix(char *s)
{
    unsigned char *p = (unsigned char *)s;
    size_t n = strlen(s), i = 0;
    while (i < n) {
        size_t k = text_seq_len(p + i, n - i);
        if (k) {
            i += k;
            continue;
        }
        /* a lead byte whose sequence the end of the buffer cut: drop the tail */
        size_t want = p[i] >= 0xf0 ? 4 : p[i] >= 0xe0 ? 3 : p[i] >= 0xc2 ? 2 : 0;
        if (want && p[i] <= 0xf4 && n - i < want) {
            size_t j = i + 1;
            while (j < n && (p[j] & 0xc0) == 0x80)
                j++;
            if (j == n) {
                p[i] = '\0';
                break;
            }
        }
        p[i++] = '?';
    }
    return s;
}

size_t text_escape(char *dst, size_t cap, const char *s, size_t n)
{
    if (cap == 0)
        return 0;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, o = 0;
    while (i < n) {
        char esc[8];
        const char *out = esc;
        size_t k = text_seq_len(p + i, n - i), w;
        if (k == 0) {
            snprintf(esc, sizeof esc, "\\x%02x", p[i]);
            k = 1;
        } else if (k == 1 && (p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\')) {
            switch (p[i]) {
            case '\\':
                out = "\\\\";
                break;
            case '\n':
                out = "\\n";
                break;
            case '\t':
                out = "\\t";
                break;
            case '\r':
                out = "\\r";
                break;
            default:
                snprintf(esc, sizeof esc, "\\x%02x", p[i]);
            }
        } else if (k == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0) {
            snprintf(esc, sizeof esc, "\\u%04x", p[i + 1]); /* C1 control */
        } else {
            out = NULL;
        }
        w = out ? strlen(out) : k;
        if (o + w > cap - 1)
            break;
        memcpy(dst + o, out ? out : (const char *)p + i, w);
        o += w;
        i += k;
    }
    dst[o] = '\0';
    return o;
}

const char *text_esc(const char *s)
{
    static _Thread_local char bufs[4][256];
    static _Thread_local unsigned next;
    char *b = bufs[next++ % 4];
    text_escape(b, sizeof bufs[0], s ? s : "(null)", s ? strlen(s) : 6);
    return b;
}
