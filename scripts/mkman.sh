#!/usr/bin/env bash
# scripts/mkman.sh BIN OUTDIR - writes man pages (section 1) for gridnode and each of
# its subcommands into OUTDIR, generated from the binary's own help texts, so the man
# pages and `--help` can never disagree: gridnode.1 from `gridnode help`, and
# gridnode-CMD.1 from `gridnode CMD --help` for every command `gridnode help` lists.
set -eu
bin=${1:?usage: scripts/mkman.sh BIN OUTDIR}
out=${2:?usage: scripts/mkman.sh BIN OUTDIR}
mkdir -p "$out"
version=$(git -C "$(dirname "$0")/.." describe --always --dirty 2>/dev/null || echo unknown)
date=$(date -u +%Y-%m-%d)

# Text to roff: backslashes escaped, a leading '.' or '\'' made literal, kept verbatim
# between .nf/.fi so the help's own layout (tables of options) survives.
roff() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }

commands=$("$bin" help | sed -n 's/^  \([a-z][a-z0-9-]*\) .*/\1/p' | sort -u)
{
    echo ".TH GRIDNODE 1 \"$date\" \"gridnode $version\" \"gridnode manual\""
    echo ".SH NAME"
    echo "gridnode \\- a computing grid in one executable: client, cluster, batch and meta roles and their tools"
    echo ".SH SYNOPSIS"
    echo ".B gridnode"
    echo "COMMAND [ARGS...]"
    echo ".SH DESCRIPTION"
    echo ".nf"
    "$bin" help | roff
    echo ".fi"
    echo ".SH SEE ALSO"
    echo "$commands" | sed 's/.*/.BR gridnode-& (1)/' | sed '$!s/$/,/'
} >"$out/gridnode.1"
n=1
for c in $commands; do
    help=$("$bin" "$c" --help 2>&1) || {
        echo "mkman: 'gridnode $c --help' failed" >&2
        exit 1
    }
    summary=$("$bin" help | sed -n "s/^  $c  *//p" | head -n 1 | roff)
    {
        echo ".TH GRIDNODE-$(echo "$c" | tr a-z A-Z) 1 \"$date\" \"gridnode $version\" \"gridnode manual\""
        echo ".SH NAME"
        echo "gridnode-$c \\- $summary"
        echo ".SH DESCRIPTION"
        echo ".nf"
        printf '%s\n' "$help" | roff
        echo ".fi"
        echo ".SH SEE ALSO"
        echo ".BR gridnode (1)"
    } >"$out/gridnode-$c.1"
    n=$((n + 1))
done
echo "mkman: $n man pages in $out"
