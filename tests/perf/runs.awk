# runs.awk - awk functions shared by tests/perf/readme-tables.sh (peers, e2e)
# and tests/perf/ggml-tq2.sh: values of several runs of a measurement, kept
# per run from files named NAME-R.csv or NAME-R.txt and rendered as ranges.
# The caller sets -v runs=RUNS (files of runs above it are skipped).
#   put(NAME, KEY, R, V)  keeps value V of run R
#   rng(NAME, KEY)        its range over the runs ("-" for none)
#   ratio(A, B, KEY)      the range of A/B taken run by run, "×" appended (its
#                         low end left in rlo; "-" when no run has both)
#   runof(FILE), base(FILE)  the run and the NAME of a file; run, file: of the
#                         current one
#   kv(KEY)               the value of KEY=V among the fields W[1..nw] of a
#                         .txt line
#   shp(S)                a shape MxK written M×K
function num(x) { return (x >= 999.5) ? sprintf("%.0f", x) : sprintf("%.3g", x) }
function rnum(x) { return sprintf((x < 9.995) ? "%.2f" : "%.1f", x) }
function span(a, b, f) { a = f ? rnum(a) : num(a); b = f ? rnum(b) : num(b); return (a == b) ? a : a "-" b }
function put(n, k, r, v) { if (v != "") val[n, k, r] = v + 0 }
function rng(n, k,   r, v, lo, hi, any) {
    for (r = 1; r <= runs; r++)
        if ((n, k, r) in val) { v = val[n, k, r]; if (!any || v < lo) lo = v; if (!any || v > hi) hi = v; any = 1 }
    return any ? span(lo, hi) : "-"
}
function ratio(a, b, k,   r, v, lo, hi, any) {
    rlo = 0
    for (r = 1; r <= runs; r++)
        if (((a, k, r) in val) && ((b, k, r) in val) && val[b, k, r] > 0) {
            v = val[a, k, r] / val[b, k, r]; if (!any || v < lo) lo = v; if (!any || v > hi) hi = v; any = 1
        }
    if (!any) return "-"
    rlo = lo
    return span(lo, hi, 1) "×"
}
function runof(f) {
    if (!match(f, /-[0-9]+\.(csv|txt)$/)) return 0
    f = substr(f, RSTART + 1, RLENGTH - 5) + 0
    return (f <= runs) ? f : 0
}
function base(f) { sub(/.*\//, "", f); sub(/-[0-9]+\.(csv|txt)$/, "", f); return f }
function kv(key,   i) { for (i = 1; i <= nw; i++) if (index(W[i], key "=") == 1) return substr(W[i], length(key) + 2); return "" }
function shp(s) { gsub(/x/, "×", s); return s }
FNR == 1 { run = runof(FILENAME); file = base(FILENAME) }
run == 0 { next }
FILENAME ~ /\.txt$/ { nw = split($0, W, " ") }
