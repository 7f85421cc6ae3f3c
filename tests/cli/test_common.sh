#!/bin/sh
# test_common.sh - what every bitnet-* tool must do the same way: --help on
# stdout with status 0 naming the tool, --version with status 0, an unknown
# flag and a flag given twice as usage errors (status 2) with a message
# prefixed by the tool name.
. "$(dirname "$0")/lib.sh"

not_in() { ! grep -q "$1" "$2"; }
found=0
for tool in "$BIN"/bitnet-*; do
    [ -x "$tool" ] && [ -f "$tool" ] || continue
    found=$((found + 1))
    name=$(basename "$tool")
    expect_rc 0 "$name --help exits 0" "$tool" --help
    expect_out "$name" "$name --help names the tool on stdout"
    expect_out "Usage: $name" "$name --help prints a usage line"
    check "$name --help prints nothing on stderr" [ ! -s "$T/err" ]
    expect_rc 0 "$name --version exits 0" "$tool" --version
    expect_out "^$name [0-9][0-9.]*" "$name --version prints the name and version"
    expect_rc 2 "$name with an unknown flag exits 2" "$tool" --no-such-flag-xyz
    expect_err "^$name: " "$name's usage error is prefixed with its name"
    check "$name's usage error leaves stdout empty" [ ! -s "$T/out" ]
    # a flag given twice (argtable numbers this error as it numbers running out of memory)
    expect_rc 2 "$name with --quiet twice exits 2" "$tool" --quiet --quiet
    expect_err "^$name: " "$name's repeated-flag error is prefixed with its name"
    check "$name's repeated-flag error is not reported as out of memory" not_in "out of memory" "$T/err"
done
check "tools were found in \$BIN" [ "$found" -gt 0 ]

echo "1..$_n"
