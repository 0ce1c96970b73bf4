#!/bin/sh
# Runs the README's Quick start and CI on a fresh Debian 12 machine, as
# near as one can get on this one: a minimal bookworm root made by
# `debootstrap --variant=minbase` (no compiler, no Python, no git, no
# ca-certificates), a clean clone of the repository's HEAD (not the work
# tree), and, as root inside it (chroot, with /proc, /sys, /dev, /dev/pts
# and a /dev/shm mounted):
#   1 sh scripts/demo.sh
#   2 sh scripts/test.sh
#   3 CI=true bash .ci/run
# one after the other, each run whatever the one before gave.  Nothing is
# installed in the root beforehand: whatever a command uses, the project's
# own scripts must install.  Prints each command's exit status, verdict and
# wall time (and .ci/run's step times) and exits 1 if any failed.  Every
# mount is undone on exit, failure or interrupt included.
#
# The root's apt sources are the host's own Debian ones (bookworm and, where
# the host has them, bookworm-updates, bookworm-security, ...), read from
# /etc/apt/sources.list and /etc/apt/sources.list.d/*.list and *.sources
# (deb822); debootstrap uses the host's bookworm mirror.  Third-party
# sources of the host are left out.
#
# Usage (as root): scripts/fresh-check.sh [options]
#   --root DIR       the root's folder (default /var/tmp/peak-fresh/root);
#                    beside it DIR.minbase.tar (the bootstrapped root, for
#                    --reuse) and DIR.logs/ (one log per command)
#   --reuse          start from DIR.minbase.tar, saved by an earlier run,
#                    instead of running debootstrap again: the root is just
#                    as fresh, made sooner (default: debootstrap)
#   --reuse-as-is    run in DIR as the last run left it (packages installed,
#                    build folders kept); for iterating on a failure, not a
#                    fresh-machine check
#   --apt-cache DIR  keep the downloaded .deb files in DIR (on the host)
#                    between runs; they are still installed, not downloaded
#   --repo PATH      the repository to clone (default: this script's)
#   --rev REV        the commit to check out (default HEAD)
#   --only LIST      a comma-separated part of demo,test,ci (default all)
#   --keep           keep the root after a run that passed (a failing run
#                    always keeps it, to look into)
# e.g.  sh scripts/fresh-check.sh >fresh.log 2>&1 &   (30-40 min on 2 cores)
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
root=/var/tmp/peak-fresh/root
mode=fresh
apt_cache=""
repo=$here
rev=HEAD
only="demo,test,ci"
keep=no
suite=bookworm

usage() { # exit-status
    sed -n '/^# Usage/,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit "$1"
}
while [ $# -gt 0 ]; do
    case "$1" in
    --root) root=${2:?}; shift ;;
    --reuse) mode=reuse ;;
    --reuse-as-is) mode=as-is ;;
    --apt-cache) apt_cache=${2:?}; shift ;;
    --repo) repo=${2:?}; shift ;;
    --rev) rev=${2:?}; shift ;;
    --only) only=${2:?}; shift ;;
    --keep) keep=yes ;;
    -h | --help) usage 0 ;;
    *) echo "fresh-check: unknown argument '$1'" >&2; usage 2 ;;
    esac
    shift
done
for c in $(echo "$only" | tr ',' ' '); do
    case "$c" in demo | test | ci) ;; *) echo "fresh-check: --only: '$c' is not demo, test or ci" >&2; exit 2 ;; esac
done
if [ "$(id -u)" -ne 0 ]; then
    echo "fresh-check: needs root (debootstrap, mount, chroot)" >&2
    exit 2
fi
# Canonical (no symlink, no . or ..): it is compared with the kernel's mount
# table and with each process's root.
root=$(realpath -m "$root")
case "$root" in
*[[:space:]]* | / | /proc* | /sys* | /dev* | /usr | /etc | /var | /var/tmp | /tmp | /root | /work)
    echo "fresh-check: --root '$root': not a folder of its own" >&2
    exit 2
    ;;
esac
snapshot=$root.minbase.tar
logs=$root.logs

say() { echo "fresh-check: $*"; }
now() { date +%s; }

# ---- mounts, and undoing them --------------------------------------------
# The mount points under the root, deepest first (from the kernel's table,
# not from memory: a run killed earlier may have left some).
mounts_under_root() {
    awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
# Processes whose root is ours were started by this script (or a run of it
# killed earlier): anything left running in the root is ended before the
# unmounting, by its process id.
root_pids() {
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && echo "${p#/proc/}"
    done
    return 0
}
umount_all() {
    pids=$(root_pids)
    if [ -n "$pids" ]; then
        # shellcheck disable=SC2086
        kill -TERM $pids 2>/dev/null || true
        sleep 2
        pids=$(root_pids)
        # shellcheck disable=SC2086
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    fi
    for m in $(mounts_under_root); do
        umount "$m" 2>/dev/null || umount -l "$m" || echo "fresh-check: could not unmount $m" >&2
    done
}
# rm -rf of a root with /dev bound into it would delete the host's devices:
# never without checking that nothing is mounted there, and never across
# file systems.
remove_root() {
    umount_all
    if [ -n "$(mounts_under_root)" ]; then
        echo "fresh-check: still mounted under $root, not removing it:" >&2
        mounts_under_root >&2
        exit 1
    fi
    rm -rf --one-file-system "$root"
}
do_mount() { # target mount-args...; private: nothing propagates to the host
    target=$1
    shift
    mount "$@" "$target"
    mount --make-private "$target"
}
mount_all() {
    do_mount "$root/proc" -t proc proc
    do_mount "$root/sys" --bind /sys
    do_mount "$root/dev" --bind /dev
    do_mount "$root/dev/pts" --bind /dev/pts
    mkdir -p "$root/dev/shm"
    do_mount "$root/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev shm
    if [ -n "$apt_cache" ]; then
        mkdir -p "$apt_cache/partial" "$root/var/cache/apt/archives"
        do_mount "$root/var/cache/apt/archives" --bind "$apt_cache"
    fi
}
status=0
# shellcheck disable=SC2317 # run by the trap
on_exit() {
    rc=$?
    trap - EXIT INT TERM
    umount_all
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- the host's tools ------------------------------------------------------
host_missing=""
for p in debootstrap debian-archive-keyring gpgv git; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        host_missing="$host_missing $p"
done
if [ -n "$host_missing" ]; then
    say "installing on the host:$host_missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq -o DPkg::Lock::Timeout=600
    # shellcheck disable=SC2086
    apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends $host_missing >/dev/null
fi

# ---- the host's Debian apt sources ------------------------------------------
# One line per source: URI SUITE COMPONENTS... [signed-by=PATH], for every
# enabled "deb" entry, one-line style or deb822.
host_sources() {
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk '
        { sub(/#.*/, "") }
        $1 != "deb" { next }
        {
            i = 2; signed = ""
            if ($2 ~ /^\[/) {
                opts = ""
                for (; i <= NF; i++) { opts = opts " " $i; if ($i ~ /\]$/) { i++; break } }
                gsub(/[][]/, " ", opts)
                n = split(opts, o, /[ \t]+/)
                for (k = 1; k <= n; k++) if (tolower(o[k]) ~ /^signed-by=/) signed = substr(o[k], 11)
            }
            line = $i " " $(i + 1)
            for (k = i + 2; k <= NF; k++) line = line " " $k
            if (signed != "") line = line " signed-by=" signed
            print line
        }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk '
        function flush(   nu, ns, u, s, k, line) {
            if (f["types"] ~ /(^|[ \t])deb([ \t]|$)/ && tolower(f["enabled"]) !~ /^no/) {
                nu = split(f["uris"], u, /[ \t]+/); ns = split(f["suites"], s, /[ \t]+/)
                for (k = 1; k <= nu; k++) for (j = 1; j <= ns; j++) {
                    if (u[k] == "" || s[j] == "") continue
                    line = u[k] " " s[j] " " f["components"]
                    # a path; a key written into the file itself is left out
                    # (the root has the Debian keys in trusted.gpg.d)
                    if (f["signed-by"] ~ /^\//) line = line " signed-by=" f["signed-by"]
                    print line
                }
            }
            split("", f); last = ""
        }
        /^#/ { next }
        /^[ \t]*$/ { flush(); next }
        /^[ \t]/ { if (last != "") f[last] = f[last] "\n" $0; next }
        {
            c = index($0, ":"); if (c == 0) next
            last = tolower(substr($0, 1, c - 1)); v = substr($0, c + 1)
            gsub(/^[ \t]+|[ \t]+$/, "", v); f[last] = v
        }
        END { flush() }' "$f"
    done
}
# Debian's own suites only (bookworm, bookworm-updates, bookworm-security,
# bookworm-backports, ...): a third-party source would need keys and hosts
# a fresh Debian machine does not have.
debian_sources=$(host_sources | awk -v s="$suite" '$2 == s || index($2, s "-") == 1' | sort -u)
mirror=$(echo "$debian_sources" | awk -v s="$suite" '$2 == s { print $1; exit }')
keyring=$(echo "$debian_sources" | awk -v s="$suite" '$2 == s { for (i = 3; i <= NF; i++) if ($i ~ /^signed-by=/) { print substr($i, 11); exit } }')
if [ -z "$mirror" ]; then
    echo "fresh-check: the host's apt sources have no '$suite' suite to bootstrap from" >&2
    exit 1
fi

# ---- the root --------------------------------------------------------------
t_start=$(now)
mkdir -p "$(dirname "$root")"
umount_all # a run killed earlier
bootstrap_what=""
case "$mode" in
fresh)
    [ ! -e "$root" ] || remove_root
    say "debootstrap --variant=minbase $suite $root (mirror from the host's apt sources: $mirror)"
    t0=$(now)
    debootstrap --variant=minbase ${keyring:+--keyring="$keyring"} "$suite" "$root" "$mirror" \
        >"$root.debootstrap.log" 2>&1 || {
        tail -n 30 "$root.debootstrap.log"
        echo "fresh-check: debootstrap failed (log: $root.debootstrap.log)" >&2
        exit 1
    }
    tar -C "$root" -cf "$snapshot.tmp" . && mv "$snapshot.tmp" "$snapshot"
    bootstrap_what="debootstrap --variant=minbase $suite, $(($(now) - t0)) s"
    ;;
reuse)
    if [ ! -f "$snapshot" ]; then
        echo "fresh-check: --reuse: no $snapshot (run once without --reuse first)" >&2
        exit 1
    fi
    [ ! -e "$root" ] || remove_root
    t0=$(now)
    mkdir -p "$root"
    tar -C "$root" -xf "$snapshot"
    bootstrap_what="minbase $suite from $snapshot, $(($(now) - t0)) s"
    ;;
as-is)
    if [ ! -x "$root/usr/bin/apt-get" ]; then
        echo "fresh-check: --reuse-as-is: $root is not a bootstrapped root" >&2
        exit 1
    fi
    bootstrap_what="$root as the last run left it (NOT a fresh machine)"
    ;;
esac

# The host's Debian sources, as they are; DNS as the host has it; and no
# service of a package started from the root onto the host.
{
    echo "# The host's Debian sources (scripts/fresh-check.sh)"
    echo "$debian_sources" | while read -r uri s rest; do
        opts=""
        comps=""
        for w in $rest; do
            case "$w" in
            signed-by=*)
                k=${w#signed-by=}
                if [ ! -f "$root$k" ] && [ -f "$k" ]; then
                    mkdir -p "$root$(dirname "$k")" && cp "$k" "$root$k"
                fi
                [ -f "$root$k" ] && opts=" [signed-by=$k]"
                ;;
            *) comps="$comps $w" ;;
            esac
        done
        echo "deb$opts $uri $s$comps"
    done
} >"$root/etc/apt/sources.list"
rm -f "$root"/etc/apt/sources.list.d/*.list "$root"/etc/apt/sources.list.d/*.sources
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The host's network, like its resolver: where the host reaches the
# package index through a proxy with its own certificate authority (PIP_CERT
# names the bundle), pip in the root needs that bundle too; a machine that
# reaches PyPI directly needs nothing (pip carries its own CAs).
pip_cert=""
if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then
    cp "$PIP_CERT" "$root/etc/peak-fresh-host-ca.pem"
    pip_cert=PIP_CERT=/etc/peak-fresh-host-ca.pem
fi
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

# A clean clone of the commit, not the work tree.
sha=$(git -C "$repo" rev-parse --verify "$rev^{commit}")
src=/root/peak
[ "$mode" = as-is ] && [ -d "$root$src" ] && rm -rf --one-file-system "${root:?}$src"
git clone -q --no-hardlinks --no-checkout "$repo" "$root$src"
git -C "$root$src" -c advice.detachedHead=false checkout -q --detach "$sha"
say "$(git -C "$root$src" log -1 --format='commit %h %s' | cut -c1-100)"
say "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"

mount_all
rm -rf "$logs"
mkdir -p "$logs"

# ---- the commands ----------------------------------------------------------
summary=""
run() { # name command...
    name=$1
    shift
    echo
    say "==== [$name] $* (in $root:$src)"
    t0=$(now)
    {
        rc=0
        chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin $pip_cert \
            /bin/sh -c "cd $src && exec \"\$@\"" sh "$@" </dev/null 2>&1 || rc=$?
        echo "$rc" >"$logs/$name.rc"
        times >"$logs/$name.times" # this subshell's children: the command
    } | tee "$logs/$name.log" &
    # In the background, waited for: a signal to this script interrupts the
    # wait (its trap ends the command and unmounts) instead of waiting for it.
    wait $!
    dt=$(($(now) - t0))
    rc=$(cat "$logs/$name.rc")
    cpu=$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); s += p[1] * 60 + p[2] }
                         printf "%d", s }' "$logs/$name.times")
    if [ "$rc" -eq 0 ]; then verdict=pass; else verdict=FAIL; status=1; fi
    say "==== [$name] exit $rc ($verdict) in $dt s (CPU $cpu s)"
    summary="$summary
  $(printf '%-26s exit %3d  %-4s %5d s  CPU %5d s' "$*" "$rc" "$verdict" "$dt" "$cpu")"
}
for c in $(echo "$only" | tr ',' ' '); do
    case "$c" in
    demo) run demo sh scripts/demo.sh ;;
    test) run test sh scripts/test.sh ;;
    ci) run ci env CI=true bash .ci/run ;;
    esac
done

echo
echo "fresh-check summary: $sha"
echo "  root: $bootstrap_what"
echo "  apt sources: $(echo "$debian_sources" | awk '{ printf "%s%s", (NR > 1 ? ", " : ""), $2 }')"
echo "  commands (logs in $logs):$summary"
if [ -f "$logs/ci.log" ]; then
    sed -n '/^=== step times:/,/^=== CI passed/p' "$logs/ci.log" | sed 's/^/  /'
    grep -q '^=== step times:' "$logs/ci.log" ||
        echo "  .ci/run stopped at: $(grep '^=== \[' "$logs/ci.log" | tail -n 1)"
fi
echo "  total: $(($(now) - t_start)) s; load average now: $(cut -d' ' -f1-3 /proc/loadavg)"

umount_all
if [ "$status" -eq 0 ] && [ "$keep" = no ] && [ "$mode" != as-is ]; then
    remove_root
    echo "  root removed (--keep keeps it; --reuse starts from $snapshot)"
else
    echo "  root kept: $root ($(du -sh --one-file-system "$root" 2>/dev/null | cut -f1))"
fi
[ "$status" -eq 0 ] && echo "fresh-check: all passed" || echo "fresh-check: FAILED"
exit "$status"
