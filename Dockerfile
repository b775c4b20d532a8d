# The image the generated manifests name (warm-up sidecar, warm-up Job): the inferscale
# binary alone on a distroless base, running as a non-root user, with nothing to write but
# what a volume gives it. docs/deploy.md shows how to build and push it.
#
#   docker build -t registry.example.com/inferscale:0.1.0 .
#   inferscale generate ... --inferscale-image registry.example.com/inferscale:0.1.0

# --- build: the release binary from the locked dependency tree ----------------------------
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p inferscale \
 && strip target/release/inferscale \
 && target/release/inferscale --version

# --- runtime: glibc and CA roots only, uid 65532 ------------------------------------------
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/inferscale /usr/local/bin/inferscale
USER 65532:65532
# Servers bind 127.0.0.1 unless told otherwise; in a pod, pass --listen 0.0.0.0:PORT.
ENTRYPOINT ["/usr/local/bin/inferscale"]
CMD ["--help"]
