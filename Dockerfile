# Switchboard in a container: a build stage compiles the sources and keeps only the runtime dependencies;
# the final image runs as the unprivileged `node` user, with everything it keeps in the /srv/switchboard
# volume (switchboard.json and .env if you put them there, data/ for the state, workspace/ for the agent).
#
#   docker build -t switchboard .
#   docker run -d --name switchboard -p 127.0.0.1:18789:18789 \
#     -e SWITCHBOARD_AUTH_TOKEN=<a long random string> --env-file .env \
#     -v switchboard:/srv/switchboard switchboard
#
# The gateway listens on 0.0.0.0 inside the container, so it needs SWITCHBOARD_AUTH_TOKEN (it refuses to start
# without one). One container per volume: a second gateway on the same state folder refuses to start.

FROM node:20-bookworm-slim AS build
WORKDIR /app
# sqlite3 and better-sqlite3 ship prebuilt binaries; the compilers are the fallback when none fits the platform.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY bin ./bin
COPY src ./src
COPY channels ./channels
RUN npm ci --no-audit --no-fund \
 && npm run build \
 && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    SWITCHBOARD_HOST=0.0.0.0 \
    SWITCHBOARD_PORT=18789
WORKDIR /app
COPY --from=build --chown=root:root /app/package.json ./
COPY --from=build --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/bin ./bin
COPY --from=build --chown=root:root /app/src ./src
COPY --from=build --chown=root:root /app/channels ./channels
COPY --from=build --chown=root:root /app/dist ./dist
# The compiled build is used while its stamp is newer than the sources: make sure it is after the copies.
RUN touch dist/.build-stamp \
 && mkdir -p /srv/switchboard && chown node:node /srv/switchboard
USER node
WORKDIR /srv/switchboard
VOLUME ["/srv/switchboard"]
EXPOSE 18789
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.SWITCHBOARD_PORT||18789)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# Node is PID 1 and handles SIGTERM itself: running turns finish, writes are flushed, then it exits.
CMD ["node", "/app/bin/switchboard.mjs", "start"]
