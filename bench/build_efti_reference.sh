#!/usr/bin/env bash
# Build the public EFTI reference implementation (github.com/bogdanvuk/efti) for side-by-side benches.
#
#   bash bench/build_efti_reference.sh GIT_DIR OUT_DIR [--test-fold-fix]
#
# GIT_DIR  a clone or bare mirror of github.com/bogdanvuk/efti (`git clone --bare URL efti.git`).
#          Nothing of it is copied into treegen: it is built in OUT_DIR.
# OUT_DIR  where the sources are exported and built; the binary is OUT_DIR/rel/efti.
#
# Files whose blobs the mirror lacks (the large bank and shuttle datasets) are skipped and their
# entries removed from src/crossvalid.c; no other dataset changes.
#
# --test-fold-fix  one added line in src/main.c: efti_clear_instances() before the test fold is
#   loaded. Without it the reference's cross-validation appends the test rows to the training rows
#   (efti_load_instance) and ensemble_eval then scores train + test rows, so its printed fold
#   "accuracy" is not a test accuracy. With it the printed accuracy is the test-fold accuracy.
#   (Training is unchanged: the fix only runs after efti() has returned the tree.)
set -euo pipefail

if [[ $# -lt 2 ]]; then
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
src_git=$1
out=$2
fix=${3:-}
if ! git --git-dir="$src_git" rev-parse HEAD >/dev/null 2>&1; then
    src_git="$src_git/.git"
fi
git --git-dir="$src_git" rev-parse HEAD >/dev/null 2>&1 || { echo "build_efti_reference: $1 is not a git repository" >&2; exit 2; }

rm -rf "$out"
mkdir -p "$out"
missing=()
while IFS= read -r path; do
    mkdir -p "$out/$(dirname "$path")"
    if ! git --git-dir="$src_git" show "HEAD:$path" >"$out/$path" 2>/dev/null; then
        rm -f "$out/$path"
        missing+=("$path")
    fi
done < <(git --git-dir="$src_git" ls-tree -r --name-only HEAD -- Makefile src)

for path in "${missing[@]}"; do
    name=$(basename "$path" .c)
    if [[ $path == src/datasets/*.c ]]; then
        sed -i "/extern T_Dataset ${name}_dataset;/d; /&${name}_dataset,/d" "$out/src/crossvalid.c"
        echo "build_efti_reference: skipped $path (blob not in the mirror)" >&2
    else
        echo "build_efti_reference: $path is missing from the mirror; cannot build" >&2
        exit 1
    fi
done

if [[ $fix == --test-fold-fix ]]; then
    python3 - "$out/src/main.c" <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read()
anchor = "                if (cv_conf->fold_chunk_size > 0) {\n"
if s.count(anchor) != 1:
    sys.exit("build_efti_reference: src/main.c changed upstream; cannot apply --test-fold-fix")
s = s.replace(anchor, anchor + "                    efti_clear_instances(); /* test-fold fix (treegen bench) */\n")
s = s.replace('#include "crossvalid.h"\n', '#include "crossvalid.h"\nint efti_clear_instances(void);\n', 1)
open(p, "w").write(s)
EOF
elif [[ -n $fix ]]; then
    echo "build_efti_reference: unknown option $fix" >&2
    exit 2
fi

make -C "$out" rel >"$out/build.log" 2>&1 || { tail -20 "$out/build.log" >&2; exit 1; }
echo "$out/rel/efti ($(git --git-dir="$src_git" rev-parse --short HEAD)${fix:+, $fix})"
