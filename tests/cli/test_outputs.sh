#!/bin/sh
# test_outputs.sh - what -o may name, and that nothing it names is destroyed:
# a full device fails with exit 3, /dev/null and FIFOs are written directly
# and stay what they were, a symbolic link is followed (the link stays), a
# replaced file keeps its mode, a directory or an unwritable directory fails
# before any work; signals during a write remove the temporary, leave the
# target and end with 128+n; leftover temporaries are refused as inputs; 16
# concurrent writers of one target leave one whole output, and readers see
# the old or the new file whole; writers of two different outputs racing for
# one target leave exactly one of them, and readers see the old file, one or
# the other, whole.
. "$(dirname "$0")/lib.sh"

REAL=$TESTDATA/real/hep-bitnet-mnist-b158.safetensors
JET=$TESTDATA/real/fastml-jet-b158.safetensors
X=$TESTDATA/bitlinear/x.npy
W=$TESTDATA/bitlinear/tiny.bnt:w

# Device nodes of our own (as root), so that a tool that replaced its target
# could never replace the machine's /dev/full or /dev/null; without mknod the
# real ones are safe to use: a non-root rename into /dev fails.
mkdir "$T/dev"
if mknod "$T/dev/full" c 1 7 2>/dev/null && mknod "$T/dev/null" c 1 3 2>/dev/null; then
    FULL=$T/dev/full NULLDEV=$T/dev/null
elif [ "$(id -u)" -ne 0 ]; then
    FULL=/dev/full NULLDEV=/dev/null
else
    FULL="" NULLDEV=""
    echo "# skipped: device nodes (root without mknod: the real /dev/full would be at risk)"
fi
is_chardev() { [ -c "$1" ] && [ ! -L "$1" ]; }
no_temps() { [ -z "$(find "$1" -name '.*.bnpart.*' 2>/dev/null)" ]; }

# ---- devices ----
if [ -n "$FULL" ]; then
    for tool in convert matmul op quantize; do
        case $tool in
        convert) set -- bitnet-convert "$REAL" -o "$FULL" ;;
        matmul) set -- bitnet-matmul -w "$W" -x "$X" -o "$FULL" ;;
        op) set -- bitnet-op relu "$X" -o "$FULL" ;;
        quantize) set -- bitnet-quantize "$REAL" -o "$FULL" ;;
        esac
        expect_rc 3 "bitnet-$tool -o /dev/full: exit 3" "$@"
        expect_err "bitnet-$tool: .*full" "bitnet-$tool -o /dev/full: says which output failed"
        check "bitnet-$tool -o /dev/full: /dev/full is still a character device" is_chardev "$FULL"
    done
    expect_rc 3 "bitnet-bench -o /dev/full: exit 3" bitnet-bench --min-reps 2 --min-time 0 --warmup 1 --roofline-size 1 --max-mem 256 --op copy --shape 4097 \
        --device cpu --baseline none --no-check -o "$FULL"
    check "bench: /dev/full is still a character device" is_chardev "$FULL"
    expect_rc 0 "bitnet-convert -o /dev/null works" bitnet-convert "$REAL" -o "$NULLDEV"
    check "/dev/null is still a character device" is_chardev "$NULLDEV"
    check "/dev/null still reads empty" [ ! -s "$NULLDEV" ]
    expect_rc 0 "bitnet-quantize -o /dev/null works" bitnet-quantize "$REAL" -o "$NULLDEV"
    check "/dev/null is still a character device after quantize" is_chardev "$NULLDEV"
    check "no temporary left next to the devices" no_temps "$T/dev"
fi

# ---- a FIFO is written directly ----
mkfifo "$T/fifo"
cat "$T/fifo" > "$T/from_fifo" &
reader=$!
expect_rc 0 "write into a FIFO" bitnet-convert "$JET" -o "$T/fifo"
wait $reader
check "the FIFO is still a FIFO" [ -p "$T/fifo" ]
expect_rc 0 "the same conversion into a file" bitnet-convert "$JET" -o "$T/jet.bnt"
# the command line (with the path) is in the metadata: compare the tensors
expect_rc 0 "what went through the FIFO is a whole .bnt" bitnet-verify --compare "$T/jet.bnt" "$T/from_fifo" --exact

# ---- symbolic links are followed ----
mkdir "$T/links"
printf 'old\n' > "$T/links/real.bnt"
chmod 640 "$T/links/real.bnt"
ln -s real.bnt "$T/links/link.bnt"
expect_rc 0 "write through a relative symbolic link" bitnet-convert "$JET" -o "$T/links/link.bnt"
check "the link is still a link to real.bnt" [ "$(readlink "$T/links/link.bnt")" = real.bnt ]
expect_rc 0 "the file it names was replaced" bitnet-verify --compare "$T/jet.bnt" "$T/links/real.bnt" --exact
check "the replaced file kept its mode 640" [ "$(stat -c %a "$T/links/real.bnt")" = 640 ]
ln -s "$T/links/new.bnt" "$T/links/dangling"
expect_rc 0 "a dangling link: the file is created where it points" bitnet-convert "$JET" -o "$T/links/dangling"
expect_rc 0 "the dangling link now names a whole file" bitnet-verify --compare "$T/jet.bnt" "$T/links/new.bnt" --exact
check "... and is still a link" [ -L "$T/links/dangling" ]
ln -s loop1 "$T/links/loop2"
ln -s loop2 "$T/links/loop1"
expect_rc 3 "a loop of links: exit 3" bitnet-convert "$JET" -o "$T/links/loop1"
expect_err "symbolic links" "a loop of links is named"
check "no temporary left among the links" no_temps "$T/links"

# ---- a replaced file keeps its permissions; a new file gets the umask's ----
printf 'x' > "$T/mode.bnt"
chmod 604 "$T/mode.bnt"
expect_rc 0 "replace a file of mode 604" bitnet-convert "$JET" -o "$T/mode.bnt"
check "mode 604 kept" [ "$(stat -c %a "$T/mode.bnt")" = 604 ]
(umask 027 && bitnet-convert "$JET" -o "$T/umask.bnt")
check "a new file gets 0666 & ~umask (640)" [ "$(stat -c %a "$T/umask.bnt")" = 640 ]

# ---- directories: refused before any work ----
for tool in convert matmul op quantize; do
    case $tool in
    convert) set -- bitnet-convert "$REAL" -o "$T" ;;
    matmul) set -- bitnet-matmul -w "$W" -x "$X" -o "$T" ;;
    op) set -- bitnet-op relu "$X" -o "$T" ;;
    quantize) set -- bitnet-quantize -v "$REAL" -o "$T" ;;
    esac
    expect_rc 3 "bitnet-$tool -o DIRECTORY: exit 3" "$@"
    expect_err "is a directory" "bitnet-$tool -o DIRECTORY: says so"
done
check "quantize refused the directory before quantizing anything" sh -c "! grep -q quantized '$T/err'"
expect_rc 3 "bitnet-quantize --report DIRECTORY: exit 3" bitnet-quantize -v "$REAL" -o "$T/q.bnt" --report "$T"
check "... before any work (no output written)" [ ! -e "$T/q.bnt" ]

# ---- an unwritable directory, as an unprivileged user ----
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
    AS_USER="setpriv --reuid=65534 --regid=65534 --clear-groups"
elif [ "$(id -u)" -ne 0 ]; then
    AS_USER=""
else
    AS_USER=none
fi
if [ "$AS_USER" != none ]; then
    P=$(mktemp -d /tmp/bitnet-outputs.XXXXXX)
    chmod 755 "$P"
    mkdir "$P/ro"
    cp "$JET" "$X" "${W%:w}" "$P/"
    printf 'keep\n' > "$P/ro/out.bnt"
    chmod 555 "$P/ro"
    for tool in convert matmul op; do
        case $tool in
        convert) set -- "$BIN/bitnet-convert" "$P/$(basename "$JET")" -o "$P/ro/out.bnt" ;;
        matmul) set -- "$BIN/bitnet-matmul" -w "$P/tiny.bnt:w" -x "$P/x.npy" -o "$P/ro/out.bnt" ;;
        op) set -- "$BIN/bitnet-op" relu "$P/x.npy" -o "$P/ro/out.bnt" ;;
        esac
        # shellcheck disable=SC2086
        expect_rc 3 "bitnet-$tool into a read-only directory (unprivileged): exit 3" $AS_USER "$@"
        expect_err "Permission denied" "bitnet-$tool: the reason is given"
    done
    check "the file in the read-only directory is untouched" [ "$(cat "$P/ro/out.bnt")" = keep ]
    chmod 755 "$P/ro"
    rm -rf "$P"
else
    echo "# skipped: read-only directory (root without setpriv: root may write anywhere)"
fi

# ---- signals during a write ----
# The input is a FIFO fed slowly: the tool has created its temporary and is
# blocked reading when the signal comes.
sig_case() { # SIGNAME NUMBER
    d=$T/sig$1
    mkdir "$d"
    printf 'old output\n' > "$d/out.bnt"
    mkfifo "$d/in"
    bitnet-convert "$d/in" --to bnt -o "$d/out.bnt" 2>"$d/err" &
    pid=$!
    exec 7>"$d/in"
    head -c 4096 "$JET" >&7
    i=0
    while [ -z "$(find "$d" -name '.out.bnt.bnpart.*')" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    check "SIG$1: the temporary existed while writing" [ $i -lt 100 ]
    kill -s "$1" $pid
    wait $pid 2>/dev/null
    st=$?
    exec 7>&-
    check "SIG$1: exit status 128+$2 (got $st)" [ "$st" -eq $((128 + $2)) ]
    check "SIG$1: the temporary is removed" no_temps "$d"
    check "SIG$1: the existing target is untouched" [ "$(cat "$d/out.bnt")" = "old output" ]
}
sig_case INT 2
sig_case TERM 15
sig_case HUP 1
sig_case PIPE 13

# ---- leftover temporaries (SIGKILL) are never inputs ----
cp "$T/jet.bnt" "$T/.jet.bnt.bnpart.AbC123"
expect_rc 2 "a leftover temporary is refused as input" bitnet-info "$T/.jet.bnt.bnpart.AbC123"
expect_err "unfinished temporary" "the refusal says why"
expect_rc 2 "... by bitnet-verify too" bitnet-verify "$T/.jet.bnt.bnpart.AbC123"
expect_rc 2 "... and as FILE:TENSOR" bitnet-op relu "$T/.jet.bnt.bnpart.AbC123:layers.0.bias" -o "$T/b.npy"

# ---- concurrent writers and readers ----
mkdir "$T/conc"
expect_rc 0 "reference quantization" bitnet-quantize "$REAL" -o "$T/conc/ref.bnt"
expect_rc 0 "an old, different target" bitnet-quantize --scale row "$REAL" -o "$T/conc/old.bnt"
cp "$T/conc/old.bnt" "$T/conc/out.bnt"
pids=""
for i in $(seq 16); do
    bitnet-quantize "$REAL" -o "$T/conc/out.bnt" 2>"$T/conc/err$i" &
    pids="$pids $!"
done
# a reader copies the target while the writers replace it
reads=0
while kill -0 $pids 2>/dev/null; do
    cp "$T/conc/out.bnt" "$T/conc/read$reads" 2>/dev/null && reads=$((reads + 1))
    [ $reads -ge 40 ] && break
done
bad=0
for p in $pids; do wait "$p" || bad=$((bad + 1)); done
check "16 concurrent bitnet-quantize -o one target: all exit 0" [ "$bad" -eq 0 ]
expect_rc 0 "the target is a valid .bnt (every CRC)" bitnet-verify "$T/conc/out.bnt"
expect_rc 0 "its tensors equal the reference's" bitnet-verify --compare "$T/conc/ref.bnt" "$T/conc/out.bnt" --exact
check "no temporary left by the writers" no_temps "$T/conc"
torn=0
i=0
while [ $i -lt $reads ]; do
    cmp -s "$T/conc/read$i" "$T/conc/old.bnt" || cmp -s "$T/conc/read$i" "$T/conc/out.bnt" || torn=$((torn + 1))
    i=$((i + 1))
done
check "each of $reads reads during the writes saw the old or the new file whole ($torn torn)" [ "$torn" -eq 0 ]

# ---- two different outputs racing for one target ----
# The metadata records the command line, -o included: each reference is made
# with the very command the racers run, then set aside.
mkdir "$T/race"
RT=$T/race/out.bnt
race_a() { bitnet-quantize --scale tensor "$REAL" -o "$RT"; }
race_b() { bitnet-quantize --scale row "$REAL" -o "$RT"; }
bitnet-convert "$REAL" -o "$RT" 2>/dev/null && cp "$RT" "$T/race/old" &&
    race_a 2>/dev/null && cp "$RT" "$T/race/A" && race_b 2>/dev/null && cp "$RT" "$T/race/B"
check "the race's old file, A and B are made and differ" sh -c \
    "test -s '$T/race/B' && ! cmp -s '$T/race/A' '$T/race/B' && ! cmp -s '$T/race/old' '$T/race/A' && ! cmp -s '$T/race/old' '$T/race/B'"
race_a 2>/dev/null && check "A is made again byte for byte (the outputs are deterministic)" cmp -s "$RT" "$T/race/A"
any_alive() { for p in "$@"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
rounds=6 bad=0 mixed=0 reads=0 torn=0 seen_a=0 seen_b=0
for round in $(seq $rounds); do
    cp "$T/race/old" "$RT"
    pids=""
    for i in 1 2 3; do # interleaved: A, B, A, B, ...
        race_a 2>>"$T/race/err" & pids="$pids $!"
        race_b 2>>"$T/race/err" & pids="$pids $!"
    done
    # a reader polls the target while they run: every copy must be whole
    r=0
    while any_alive $pids && [ $r -lt 30 ]; do
        if cp "$RT" "$T/race/read" 2>/dev/null; then
            r=$((r + 1))
            if cmp -s "$T/race/read" "$T/race/A"; then seen_a=$((seen_a + 1))
            elif cmp -s "$T/race/read" "$T/race/B"; then seen_b=$((seen_b + 1))
            elif ! cmp -s "$T/race/read" "$T/race/old"; then torn=$((torn + 1)); cp "$T/race/read" "$T/race/torn$round"; fi
        fi
    done
    reads=$((reads + r))
    for p in $pids; do wait "$p" || bad=$((bad + 1)); done
    if cmp -s "$RT" "$T/race/A"; then seen_a=$((seen_a + 1))
    elif cmp -s "$RT" "$T/race/B"; then seen_b=$((seen_b + 1))
    else mixed=$((mixed + 1)); cp "$RT" "$T/race/final$round"; fi
done
check "$rounds rounds of 3+3 racing writers (--scale tensor vs row): all exit 0" [ "$bad" -eq 0 ]
check "after each round the target is byte for byte A or B ($mixed neither)" [ "$mixed" -eq 0 ]
check "each of $reads reads during the race saw the old file, A or B whole ($torn torn)" [ "$torn" -eq 0 ]
check "no temporary left by the racers" no_temps "$T/race"
echo "# race: A seen $seen_a times, B $seen_b times (reads and final targets)"
