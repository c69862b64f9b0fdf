#!/usr/bin/env bash
# System packages the service relies on and the tests use: the sandbox's bubblewrap and
# libseccomp, and fonts with Cyrillic and CJK glyphs (so the Russian and Chinese pages and charts
# are not boxes); the tests also need Chromium for the browser suite.
#   bash scripts/system-deps.sh           # everything `make test` needs
#   bash scripts/system-deps.sh service   # what `make run` needs: no browser
# Installed only where we are root with apt-get (CI, a fresh dev VM); elsewhere the service
# grades at the isolation the host allows (it prints which at start-up) and the tests that need
# a package skip with a message saying what is missing.
set -u
PACKAGES=(bubblewrap libseccomp2 fonts-dejavu-core fonts-noto-cjk)
[[ "${1:-}" == "service" ]] || PACKAGES+=(chromium)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "installing system packages: ${missing[*]}"
  if (apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }); then
    # matplotlib lists the system's fonts once and caches the list: a font installed after that
    # stays unseen (the Chinese charts' glyphs) until the list is made again on the next start
    if [[ " ${missing[*]} " == *" fonts-"* ]]; then
      rm -f "${MPLCONFIGDIR:-${XDG_CACHE_HOME:-$HOME/.cache}/matplotlib}"/fontlist-*.json
    fi
  else
    echo "warning: could not install ${missing[*]}; what needs them is skipped or weaker" >&2
  fi
else
  echo "note: missing system packages (${missing[*]}): install them for full isolation and CJK charts;" \
       "until then the service grades with weaker isolation and tests that need them skip" >&2
fi
exit 0
