#!/usr/bin/env bash
# Build connbench's container image where no registry can be reached (so the Dockerfile's
# FROM rust:... and FROM distroless cannot be pulled): the release binary is built on
# this machine, its shared libraries (ldd) and the loader, CA certificates and a passwd
# with the nonroot user are staged into a root filesystem, and podman builds
# Containerfile.local (FROM scratch) around it. The image's filesystem is then exported,
# which is what a container would see.
#
#   scripts/image.sh           build the image (connbench:VERSION, or $IMAGE), save it to
#                              target/image/connbench-image.tar (`docker load` / `podman
#                              load` it elsewhere, then push it to your registry) and
#                              export its filesystem to target/image/rootfs
#   scripts/image.sh --check   then, as root, run the image: --version, connect over TCP
#                              and TLS to a sandbox, and the very command line and
#                              environment `kubernetes job` gives its pods, against the
#                              sandbox with its PostgreSQL as the store. As a container
#                              (podman with runc, host network, this machine's rlimits)
#                              when that works; else the exported filesystem under chroot,
#                              as the image's user with only the image's and the Job's
#                              environment (docs/container.md says why either).
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
for a in "$@"; do
    case "$a" in
        --check) check=1 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "image.sh: unknown argument $a (see --help)" >&2; exit 2 ;;
    esac
done
if ! command -v podman >/dev/null; then
    echo "image.sh: podman not found; install it (apt-get install -y podman)" >&2
    exit 2
fi
if [ "$check" = 1 ] && [ "$(id -u)" -ne 0 ]; then
    echo "image.sh: --check runs the binary with chroot, which needs root" >&2
    exit 2
fi

cargo build --release --locked
bin=target/release/connbench
version=$("$bin" --version)
echo "image.sh: $version" >&2
image=${IMAGE:-connbench:$(awk '{print $2}' <<<"$version")}
work=target/image
rm -rf "$work"
ctx=$work/context
root=$ctx/rootfs
mkdir -p "$root/etc/ssl/certs" "$ctx/home/connbench"
# Line tables are for backtraces on the developer's machine; the image drops them
# (about 77 MB down to 15 MB).
install -D -m 0755 "$bin" "$root/usr/local/bin/connbench"
strip --strip-debug "$root/usr/local/bin/connbench"
# Each library at the path ldd resolved it to, and the loader at the path the binary's
# ELF header names, so the binary runs unchanged in the image.
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do
    install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
done
# For sslrootcert=/etc/ssl/certs/ca-certificates.crt (servers with publicly signed
# certificates); connbench itself reads only the sslrootcert a target names.
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nconnbench:x:65532:65532:connbench:/home/connbench:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nconnbench:x:65532:\n' >"$root/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
chmod 0644 "$root"/etc/{passwd,group,nsswitch.conf}
# Scratch space for --path sidecar-unix's socket directories.
mkdir -m 1777 "$root/tmp"

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
podman build --quiet -f Containerfile.local -t "$image" \
    --label org.opencontainers.image.version="$(awk '{print $2}' <<<"$version")" \
    --label org.opencontainers.image.revision="$commit" "$ctx" >/dev/null
podman save --quiet -o "$work/connbench-image.tar" "$image"
cid=$(podman create "$image")
podman export -o "$work/rootfs.tar" "$cid"
podman rm "$cid" >/dev/null
mkdir "$work/rootfs"
tar -xpf "$work/rootfs.tar" -C "$work/rootfs"
echo "image.sh: built $image ($(podman image inspect --format '{{.Size}}' "$image") bytes):" \
    "user $(podman image inspect --format '{{.Config.User}}' "$image")," \
    "entrypoint $(podman image inspect --format '{{json .Config.Entrypoint}}' "$image")," \
    "saved to $work/connbench-image.tar, filesystem in $work/rootfs" >&2
[ "$check" = 1 ] || exit 0

# ---- --check: the image, run as a pod would run it ----
rootfs=$PWD/$work/rootfs
user=$(podman image inspect --format '{{.Config.User}}' "$image")
ca=$PWD/$work/ca.crt
# podman's default RLIMIT_NOFILE (1048576) is above a hard limit like this VM's (20000),
# so it is this shell's; raising RLIMIT_NPROC above a few thousand is refused here too
# (4096 is plenty: connbench's threads are -j). crun cannot set up this VM's hybrid
# cgroup layout; runc can.
podman_run=(podman --runtime runc run --rm --network host
    --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
if command -v runc >/dev/null && "${podman_run[@]}" "$image" --version >/dev/null 2>&1; then
    mode=container
else
    mode=chroot
    echo "image.sh: podman cannot run a container here (install runc?), so the exported" \
        "filesystem runs under chroot; the runtime's /etc/hosts is copied in" >&2
    install -m 0644 /etc/hosts "$rootfs/etc/hosts"
fi
# Only what the image and the Job's pod give: the image's ENV, the Job's variables, and
# the CA where a Secret or ConfigMap volume would put it.
in_image() {
    echo "+ ($mode) connbench $*" >&2
    if [ "$mode" = container ]; then
        local e=()
        for v in "${pod_env[@]}"; do e+=(-e "$v"); done
        [ -f "$ca" ] && e+=(-v "$ca:/etc/connbench/ca.crt:ro")
        "${podman_run[@]}" "${e[@]}" "$image" "$@"
    else
        env -i PATH=/usr/local/bin HOME=/home/connbench "${pod_env[@]}" \
            /usr/sbin/chroot --userspec="$user" "$rootfs" connbench "$@"
    fi
}
pod_env=()
tar -tvf "$work/rootfs.tar" | sort -k6 >&2
in_image --version

sandbox=$("$bin" sandbox start --json --engines postgres)
trap '"$bin" sandbox stop >&2 || true' EXIT
port=$(jq -r .postgres_port <<<"$sandbox")
passfile=$(jq -r .passfile <<<"$sandbox")
password=$(awk -F: '$4 == "connbench" {print $5; exit}' "$passfile")
install -m 0644 "$(jq -r .ca_cert <<<"$sandbox")" "$ca"
install -D -m 0644 "$ca" "$rootfs/etc/connbench/ca.crt"
target="host=127.0.0.1 port=$port dbname=connbench user=connbench"
pod_env=(PGPASSWORD="$password")
# localhost: a name, resolved by the image's glibc from the runtime's /etc/hosts.
in_image connect "tcp=host=localhost port=$port dbname=connbench user=connbench sslmode=disable" \
    "tls=$target sslmode=verify-full sslrootcert=/etc/connbench/ca.crt" -n 3
in_image init "$target sslmode=disable" -s 1

# The Job's pod: its image, arguments and environment, from the manifest itself.
run=image-check-$(date +%s)
manifest=$("$bin" kubernetes job --workers 1 --image "$image" --target "$target sslmode=disable" \
    --target-secret cb-db --store "postgres://connbench@127.0.0.1:$port/connbench?sslmode=disable" \
    --store-secret cb-store --run "$run" --output json -- -S -c 2 -j 1 -T 3)
container=$(jq '.spec.template.spec.containers[0]' <<<"$manifest")
[ "$(jq -r .image <<<"$container")" = "$image" ]
mapfile -t args < <(jq -r '.args[]' <<<"$container")
mapfile -t names < <(jq -r '.env[].name' <<<"$container")
echo "image.sh: the pod's env (from Secrets): ${names[*]}" >&2
# Kubernetes sets JOB_COMPLETION_INDEX; the Secrets become the variables the manifest names.
pod_env=(JOB_COMPLETION_INDEX=0)
for n in "${names[@]}"; do pod_env+=("$n=$password"); done
in_image "${args[@]}"
pod_env=(CONNBENCH_STORE_PASSWORD="$password")
in_image runs show "$run" --store "postgres://connbench@127.0.0.1:$port/connbench?sslmode=disable"
echo "image.sh: --check passed ($mode)" >&2
