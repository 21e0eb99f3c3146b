#!/usr/bin/env bash
# Packages lcr needs that ../shared/gpu/stage.sh's wheels lack, for bench/gpu_run.sh: pure
# Python, unpacked into PART/extra (gpu_run.sh copies it into the staged site). Since the
# grounded answers (issue 53) every `lcr ask` imports wordfreq; without it the GPU run of
# 2026-11-28 lost its asks. wordfreq's lists are cut to English (lcr reads "en" only):
# 58 MB -> about 6 MB with its needs, so it fits beside a model part.
#   bash ../shared/gpu/stage.sh 62 && bash bench/gpu_extra.sh .gpu/p2   # the last part
set -euo pipefail
part=${1:?the last part, e.g. .gpu/p2}
[ -d "$part" ] || { echo "no such part: $part" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
want=(wordfreq ftfy langcodes locate wcwidth)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform any -d "$tmp" "${want[@]}"
rm -rf "$part/extra"; mkdir -p "$part/extra"
for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$part/extra"; done
find "$part/extra/wordfreq/data" -type f ! -name '*_en.msgpack.gz' -delete
find "$part/extra" -maxdepth 1 -name '*.dist-info' -exec rm -rf {} +
du -sb "$part/extra" "$part"
