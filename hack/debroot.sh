#!/usr/bin/env bash
# hack/debroot.sh — a root filesystem of Debian packages, for an image that mkimage packs (-dir):
# the packages named and everything they depend on (Depends and Pre-Depends, no Recommends), as
# this machine's apt resolves them, fetched with `apt-get download` and unpacked with
# `dpkg-deb -x`. No maintainer scripts run; what they would have made and the tests need
# (/etc/nsswitch.conf) is written here.
#
# Usage: hack/debroot.sh DIR PKG...   (DIR is made anew; the .debs are kept in _out/debs,
# and a package already there is not fetched again: `rm -r _out/debs` after an apt upgrade)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
DEBS=$ROOT/_out/debs

(($# >= 2)) || {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//' >&2
	exit 2
}
dir=$1
shift

# The closure: every real package apt-cache lists (virtual ones are printed as <name>).
mapfile -t pkgs < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
	--no-breaks --no-replaces --no-enhances "$@" | grep -v '^[ <]' | sort -u)
((${#pkgs[@]})) || {
	echo "debroot.sh: apt-cache resolved nothing for $* (apt-get update first?)" >&2
	exit 1
}
mkdir -p "$DEBS"
missing=()
for p in "${pkgs[@]}"; do
	compgen -G "$DEBS/${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
	(cd "$DEBS" && apt-get download "${missing[@]}" >&2) ||
		{ echo "debroot.sh: apt-get download failed (apt-get update first?)" >&2; exit 1; }
fi

rm -rf "$dir"
mkdir -p "$dir"
for p in "${pkgs[@]}"; do
	deb=$(compgen -G "$DEBS/${p}_*.deb" | sort -V | tail -n 1)
	dpkg-deb -x "$deb" "$dir"
	basename "$deb" >>"$dir.packages"
done
mv "$dir.packages" "$dir/.debroot-packages"
# What maintainer scripts or debootstrap would have left: /bin/sh (dash's postinst), nsswitch.conf.
[[ -e $dir/bin/sh ]] || ln -s dash "$dir/bin/sh"
[[ -e $dir/etc/nsswitch.conf ]] || printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$dir/etc/nsswitch.conf"
mkdir -p "$dir/tmp" "$dir/root" && chmod 1777 "$dir/tmp"
rm -rf "$dir/usr/share/doc" "$dir/usr/share/man" "$dir/usr/share/info" "$dir/usr/share/locale"
echo "debroot.sh: $dir: ${#pkgs[@]} packages, $(du -sh "$dir" | cut -f1)" >&2
