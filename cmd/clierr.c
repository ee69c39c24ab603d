/*
 * clierr.c - an ERROR reply told to the user (cli.h cli_print_error): what happened in
 * the words the user knows (the options typed, the commands run, not the message and
 * field names of docs/wire.md) and what to do next. --json keeps the code: one JSON
 * line on stderr with the tool (and the job it is about), the code's number and name
 * and the role's text as it came.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "lib/text.h"
#include "wire/mpjson.h"

/* Says an error in the words the user typed (cli.h); the tool's table of words. */
void cli_user_words(const char *const (*words)[2], char *text, size_t cap)
{
    /* "SUBMIT refused: x" -> "x": the user did not send a SUBMIT, they typed options */
    const char *ref = strstr(text, " refused: ");
    if (ref && ref - text < 16) {
        bool upper = true;
        for (const char *p = text; p < ref; p++)
            upper = upper && ((*p >= 'A' && *p <= 'Z') || *p == '_');
        if (upper)
            memmove(text, ref + 10, strlen(ref + 10) + 1);
    }
    char out[1024];
    size_t o = 0;
    for (const char *p = text; *p && o + 1 < sizeof out;) {
        bool hit = false;
        bool start = p == text || !((p[-1] >= 'a' && p[-1] <= 'z') || p[-1] == '_' || p[-1] == '-');
        for (size_t k = 0; start && words[k][0]; k++) {
            size_t n = strlen(words[k][0]);
            char after = p[n];
            if (!strncmp(p, words[k][0], n) && !((after >= 'a' && after <= 'z') || after == '_')) {
                size_t m = strlen(words[k][1]);
                if (o + m + 1 >= sizeof out)
                    break;
                memcpy(out + o, words[k][1], m);
                o += m;
                p += n;
                hit = true;
                break;
            }
        }
        if (!hit)
            out[o++] = *p++;
    }
    out[o] = '\0';
    snprintf(text, cap, "%s", out);
}

/* The requests a role's text may name (access refusals: "CONSOLE is for administrators
 * only"), as the command that sends them. */
static const char *const request_words[][2] = {
    {"SUBMIT", "gridnode submit"},
    {"PSUBMIT", "gridnode submit -p"},
    {"JOB_LIST", "gridnode jobs"},
    {"JOB_GET", "gridnode job"},
    {"CANCEL", "gridnode cancel"},
    {"JOB_CTL", "gridnode hold/release/requeue"},
    {"NODE_LIST", "gridnode nodes"},
    {"NODE_CTL", "gridnode nodes --drain/--resume"},
    {"CONSOLE", "gridnode console"},
    {"SD_INFO", "gridnode console"},
    {"PURGE", "gridnode purge"},
    {"EVENTS", "the change feed (job --wait)"},
    {"SHOWQ", "gridnode showq"},
    {"CHECKJOB", "gridnode checkjob"},
    {"ESTIMATE", "gridnode showstart"},
    {"DIAGNOSE", "gridnode diagnose"},
    {"RESV_SET", "gridnode setres"},
    {"RESV_LIST", "gridnode showres"},
    {"RESV_RELEASE", "gridnode releaseres"},
    {"SITE_INFO", "the site information"},
    {NULL, NULL},
};

static const char *const no_words[][2] = {{NULL, NULL}}; /* only "TYPE refused: " dropped */

static bool upper_word(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || ch == '_' || (ch >= '0' && ch <= '9');
}

/* Replaces each whole upper-case request name of text by its command (request_words). */
static void request_names(char *text, size_t cap)
{
    char out[1024];
    size_t o = 0;
    for (const char *p = text; *p && o + 1 < sizeof out;) {
        bool hit = false;
        for (size_t k = 0; (p == text || !upper_word(p[-1])) && request_words[k][0]; k++) {
            size_t n = strlen(request_words[k][0]), m = strlen(request_words[k][1]);
            if (strncmp(p, request_words[k][0], n) || upper_word(p[n]) || o + m + 1 >= sizeof out)
                continue;
            memcpy(out + o, request_words[k][1], m);
            o += m;
            p += n;
            hit = true;
            break;
        }
        if (!hit)
            out[o++] = *p++;
    }
    out[o] = '\0';
    snprintf(text, cap, "%s", out);
}

/* What to do next after an error of this code, when its text does not say; "" none. */
static const char *next_step(int code, const char *text)
{
    switch (code) {
    case WE_MALFORMED:
    case WE_VERSION:
    case WE_TYPE:
        return "the role did not understand the request: is it a gridnode role, and of "
               "this version (gridnode --version)?";
    case WE_FIELD:
        return "the role refused a value of the request: check the options (--help)";
    case WE_NOT_FOUND:
        return strstr(text, "gridnode jobs") ? "" : "gridnode jobs lists the jobs there";
    case WE_STORAGE:
        return "nothing was changed: try again later (the role's disk may be full)";
    case WE_DENIED:
        return strstr(text, "administrator") ? "" : "ask an administrator";
    case WE_AUTH:
        return "your key is no longer admitted: ask an administrator to add it again";
    default:
        return "";
    }
}

void cli_print_error(const struct cli *c, const struct cli_reply *r)
{
    size_t n;
    const char *t = wire_get_str(r->msg.root, "msg", &n);
    int code = (int)wire_get_u64(r->msg.root, "code", 0);
    char text[1024];
    if (c->json) { /* scripts: the code, and the text exactly as the role sent it */
        json_t *o = json_pack("{s:s, s:i, s:s, s:s%}", "prog", c->prog, "code", code, "error",
                              wire_err_name(code), "msg", t ? t : "", t ? n : 0);
        if (o) {
            json_dumpf(o, stderr, JSON_COMPACT);
            fputc('\n', stderr);
        }
        json_decref(o);
        return;
    }
    text_escape(text, sizeof text, t ? t : "", n);
    if (c->words) /* "SUBMIT refused: ..." and field names, in the options' words */
        cli_user_words(c->words, text, sizeof text);
    else
        cli_user_words(no_words, text, sizeof text);
    request_names(text, sizeof text);
    const char *next = next_step(code, text);
    fprintf(stderr, "%s: %s%s%s\n", c->prog, text[0] ? text : wire_err_name(code),
            next[0] ? "; " : "", next);
}
