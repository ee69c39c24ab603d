"""Draws the curves of bench/scale.sh as one SVG (small multiples, log-log), with the
standard library only.

usage: /usr/bin/python3 bench/scale_svg.py SCALE_JSON_LINES > docs/perf-scale.svg

Each panel is one figure of one level against its size (pending jobs, tasks in the
bag, node sessions, sites); a flat line is a cost that does not grow with the size. The
end-to-end level (one run, three entry points) is a table in docs/perf.md, not a curve. Lines that are not JSON
or not {"bench": "scale"} are skipped.
"""
import json
import math
import sys

PANELS = [  # (level, x key, field, title); spool_sites: one line per `slow` (0, >0)
    ("batch", "pending", "rss_per_job", "batch: bytes of VmRSS per pending job"),
    ("batch", "pending", "acks_per_s", "batch: submissions acknowledged /s"),
    ("batch", "pending", "showstart_p50_us", "batch: showstart p50 (us)"),
    ("batch", "pending", "cycle_ms", "batch: engine cycle, EASY (ms)"),
    ("batch", "pending", "cycle_conservative_ms", "batch: engine cycle, conservative (ms)"),
    ("cluster", "pending", "rss_per_task", "cluster: bytes of VmRSS per pending task"),
    ("cluster", "pending", "dispatch_per_s", "cluster: tasks dispatched /s"),
    ("cluster", "pending", "dispatch_p50_us", "cluster: dispatch round trip p50 (us)"),
    ("sessions", "sessions", "rss_per_session", "cluster: bytes of VmRSS per session"),
    ("sessions", "sessions", "dispatch_per_s", "cluster: dispatch /s over N sessions"),
    ("sessions", "sessions", "heartbeat_cpu_us", "cluster: CPU us per heartbeat"),
    ("spool", "pending", "rss_per_job", "spool: bytes of VmRSS per spooled job"),
    ("spool", "pending", "acks_per_s", "spool: submissions acknowledged /s"),
    ("spool_sites", "sites", "place_p50_ms", "spool: placement p50 (ms) vs sites"),
    ("spool_sites", "sites", "place_p99_ms", "spool: placement p99 (ms) vs sites"),
    ("spool_sites", "sites", "per_s", "spool: placements /s vs sites"),
]
COLORS = ("#1f77b4", "#d62728")
W, H, COLS = 300, 190, 4
PAD_L, PAD_R, PAD_T, PAD_B = 48, 12, 28, 30


def fmt(v):
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return ("%.3g" % (v / div)) + suf
    return "%.3g" % v


def panel(out, x0, y0, title, series):
    """series: [(label, [(x, y)...])...], drawn on one log-log frame."""
    out.append('<g transform="translate(%d,%d)">' % (x0, y0))
    out.append('<rect x="0" y="0" width="%d" height="%d" fill="#fff" stroke="#ccc"/>' % (W, H))
    out.append('<text x="%d" y="16" font-size="11" text-anchor="middle">%s</text>'
               % (W // 2, title))
    series = [(lab, [(x, y) for x, y in pts if x > 0 and y is not None and y > 0])
              for lab, pts in series]
    series = [(lab, pts) for lab, pts in series if pts]
    if not series:
        out.append('<text x="%d" y="%d" font-size="10" text-anchor="middle">no data</text>'
                   % (W // 2, H // 2))
        out.append("</g>")
        return
    allp = [p for _, pts in series for p in pts]
    x_lo = math.floor(min(math.log10(x) for x, _ in allp))
    x_hi = math.ceil(max(math.log10(x) for x, _ in allp))
    y_lo = math.floor(min(math.log10(y) for _, y in allp))
    y_hi = math.ceil(max(math.log10(y) for _, y in allp))
    if y_hi == y_lo:
        y_hi += 1
    if x_hi == x_lo:
        x_hi += 1
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B

    def px(v):
        return PAD_L + (v - x_lo) / (x_hi - x_lo) * pw

    def py(v):
        return PAD_T + ph - (v - y_lo) / (y_hi - y_lo) * ph
    for d in range(x_lo, x_hi + 1):
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>'
                   % (px(d), PAD_T, px(d), PAD_T + ph))
        out.append('<text x="%.1f" y="%d" font-size="9" text-anchor="middle">%s</text>'
                   % (px(d), H - 12, fmt(10 ** d)))
    for d in range(y_lo, y_hi + 1):
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>'
                   % (PAD_L, py(d), PAD_L + pw, py(d)))
        out.append('<text x="%d" y="%.1f" font-size="9" text-anchor="end">%s</text>'
                   % (PAD_L - 4, py(d) + 3, fmt(10 ** d)))
    for k, (lab, pts) in enumerate(series):
        c = COLORS[k % len(COLORS)]
        lx = [math.log10(x) for x, _ in pts]
        ly = [math.log10(y) for _, y in pts]
        xy = " ".join("%.1f,%.1f" % (px(a), py(b)) for a, b in zip(lx, ly))
        out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>' % (xy, c))
        for a, b, (_, y) in zip(lx, ly, pts):
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (px(a), py(b), c))
            out.append('<text x="%.1f" y="%.1f" font-size="8" text-anchor="middle">%s</text>'
                       % (px(a), py(b) - 6, fmt(y)))
        if lab:
            out.append('<text x="%d" y="%d" font-size="9" fill="%s">%s</text>'
                       % (PAD_L + 4, PAD_T + 10 + 11 * k, c, lab))
    out.append("</g>")


def main():
    rows = []
    with open(sys.argv[1]) as f:
        for line in f:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and d.get("bench") == "scale":
                rows.append(d)
    n = len(PANELS)
    rows_n = (n + COLS - 1) // COLS
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif">' % (COLS * (W + 10) + 10, rows_n * (H + 10) + 10)]
    for i, (level, xkey, field, title) in enumerate(PANELS):
        rs = [d for d in rows if d.get("level") == level]
        if level == "spool_sites":
            series = [("every site answering", [d for d in rs if not d.get("slow")]),
                      ("one site in 8 slow", [d for d in rs if d.get("slow")])]
        else:
            series = [("", rs)]
        series = [(lab, sorted((d[xkey], d.get(field)) for d in ds)) for lab, ds in series]
        panel(out, 10 + (i % COLS) * (W + 10), 10 + (i // COLS) * (H + 10), title, series)
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
