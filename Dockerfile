# relaybot: multi-stage build. mattn/go-sqlite3 needs cgo, so the binary is built with gcc against
# Debian 12's glibc and runs on distroless base-debian12 (the same glibc, CA certificates, tzdata,
# a nonroot user, no shell). Build: docker build -t relaybot .
#
# The image runs `bot serve` with BOT_CONFIG=/etc/relaybot/config.toml and keeps the SQLite
# database in the /data volume (BOT_DB=/data/bot.db, which the shipped config.toml reads).
# Mount your own config.toml over /etc/relaybot/config.toml; to reach the admin page from
# outside the container set BOT_ADMIN_LISTEN=0.0.0.0:8080 and a token (BOT_ADMIN_TOKEN).
# Stdio MCP servers run inside this image, which has no shell, node or python: prefer MCP
# servers over "http" or "sse", or build an image FROM this one that adds their runtime.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/bot ./cmd/bot \
 && mkdir -p /out/data

FROM gcr.io/distroless/base-debian12:nonroot
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
