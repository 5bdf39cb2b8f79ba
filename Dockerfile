# connbench's container image: the image `connbench kubernetes job --image` expects.
# Every pod of that Job runs this image's entrypoint with `load TARGET ... --workers N
# --run RUN --store URL` as its arguments, so the entrypoint is connbench itself.
#
#   docker build --build-arg CONNBENCH_COMMIT=$(git rev-parse --short HEAD) -t connbench:0.1 .
#   docker run --rm connbench:0.1 --version
#
# docs/container.md says what the image holds and why, and what was run where. Without a
# registry (as on the development VM), scripts/image.sh builds the same kind of image
# FROM scratch around a binary built on the host.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# .git is left out of the context (.dockerignore): the commit `--version` names comes
# from here ("unknown commit" when not given).
ARG CONNBENCH_COMMIT=
RUN cargo build --release --locked \
 && strip --strip-debug target/release/connbench \
 && ./target/release/connbench --version

# glibc, libgcc_s and CA certificates, a nonroot user (65532) and nothing else: no shell,
# no package manager. connbench needs no other file: DNS comes from the resolv.conf the
# runtime mounts, CPU readings from /proc.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/connbench /usr/local/bin/connbench
ENV PATH=/usr/local/bin:/usr/bin:/bin
# Numeric, so that Kubernetes' runAsNonRoot can check it.
USER 65532:65532
ENTRYPOINT ["connbench"]
