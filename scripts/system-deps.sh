#!/usr/bin/env bash
# System packages the tests use (the sandbox's bubblewrap, the browser tests' Chromium, and
# fonts with Cyrillic and CJK glyphs, so the Russian and Chinese pages and charts are not boxes).
# Installed only where we are root with apt-get (CI, a fresh dev VM); elsewhere the
# tests that need them skip with a message saying what is missing.
set -u
PACKAGES=(bubblewrap libseccomp2 chromium fonts-dejavu-core fonts-noto-cjk)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "installing system packages: ${missing[*]}"
  (apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
   { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }) ||
    echo "warning: could not install ${missing[*]}; tests that need them will skip" >&2
else
  echo "note: missing system packages (${missing[*]}); tests that need them will skip" >&2
fi
exit 0
