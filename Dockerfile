# relaybot: multi-stage build. mattn/go-sqlite3 needs cgo, so the binary is built with gcc against
# Debian 12's glibc and runs on distroless base-debian12 (the same glibc, CA certificates, tzdata,
# a nonroot user, no shell). Build: docker build -t relaybot .
#
# The image runs `bot serve` with BOT_CONFIG=/etc/relaybot/config.toml and keeps the SQLite
# database in the /data volume (BOT_DB=/data/bot.db, which the shipped config.toml reads).
# Mount your own config.toml over /etc/relaybot/config.toml; to reach the admin page from
# outside the container set BOT_ADMIN_LISTEN=0.0.0.0:8080 and a token (BOT_ADMIN_TOKEN).
# Stdio MCP servers run inside this image, which has no shell, node or python: prefer MCP
# servers over "http" or "sse", or build deploy/mcp-node (this image plus Node, for npx-based
# stdio servers).
#
# The base images are build arguments with the public images as defaults; a machine without a
# registry passes equivalent local images (.ci/docker does: stand-ins built from Debian packages):
#   docker build --build-arg GO_IMAGE=... --build-arg RUNTIME_IMAGE=... -t relaybot .
# GOPROXY, when given, is where the build fetches Go modules.
ARG GO_IMAGE=golang:1.26-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/base-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
ARG GOPROXY
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/bot ./cmd/bot \
 && mkdir -p /out/data

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/bot /usr/local/bin/bot
COPY --from=build --chown=nonroot:nonroot /out/data /data
COPY config.toml /etc/relaybot/config.toml
ENV BOT_CONFIG=/etc/relaybot/config.toml \
    BOT_DB=/data/bot.db
VOLUME ["/data"]
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/bot"]
CMD ["serve"]
