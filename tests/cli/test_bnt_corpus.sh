#!/bin/sh
# test_bnt_corpus.sh - bitnet-info over the .bnt golden corpus: good files
# list cleanly (also through a pipe), every broken file fails with exit 1 and
# the message that testdata/bnt/EXPECTED gives for it.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/bnt
tab=$(printf '\t')
while IFS="$tab" read -r file status detail; do
    case $file in '#'* | '') continue ;; esac
    if [ "$status" = BITNET_OK ]; then
        expect_rc 0 "$file lists" bitnet-info "$D/$file"
        run sh -c 'cat "$1" | bitnet-info -' sh "$D/$file"
        check "$file lists from a pipe" [ "$rc" -eq 0 ]
    else
        expect_rc 1 "$file refused" bitnet-info "$D/$file"
        # format detection answers first for these two
        case $file in empty.bnt) detail="truncated" ;; bad_magic.bnt) detail="unknown format" ;; esac
        if grep -q -F -e "$detail" "$T/err"; then ok "$file: message names '$detail'"; else
            notok "$file: stderr lacks '$detail'"; sed 's/^/#   /' "$T/err" | head -3; fi
    fi
done <"$D/EXPECTED"
# a truncated file through a pipe
head -c 1000 "$D/good.bnt" >"$T/cut.bnt"
run sh -c 'cat "$1" | bitnet-info -' sh "$T/cut.bnt"
check "a pipe cut short is refused" [ "$rc" -eq 1 ]
expect_err "truncated" "the message says truncated"
