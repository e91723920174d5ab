# syntax=docker/dockerfile:1.7
# One target per image: gateway, catalog, tracking, reporting, migrate.
#   docker build --target catalog -t whereabouts/catalog .
# The build stage compiles every service to JavaScript (scripts/build.ts:
# services/<name>/dist) and prunes the workspace per service (turbo prune
# --docker: that service's package.json files and a lockfile cut to its
# dependencies). Each image then holds only its own compiled code and its own
# production dependencies, and runs `node dist/main.js`: no TypeScript, no
# loader, no other service's packages.

FROM node:20.20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc turbo.json ./
COPY packages/shared/package.json packages/shared/
COPY services/gateway/package.json services/gateway/
COPY services/catalog/package.json services/catalog/
COPY services/tracking/package.json services/tracking/
COPY services/reporting/package.json services/reporting/
COPY tests/package.json tests/
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
# Prisma clients are generated into each service; generate needs no native engine.
RUN PRISMA_SCHEMA_ENGINE_BINARY=/usr/local/bin/node npx tsx scripts/prisma-generate.ts \
 && npx turbo run typecheck \
 && npx tsx scripts/build.ts \
 && for ws in gateway catalog tracking reporting shared; do \
      npx turbo prune "@whereabouts/$ws" --docker --out-dir "/pruned/$ws"; \
    done

FROM node:20.20-bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
# The image's unprivileged "node" user (uid 1000; the manifests' runAsUser).
# tini as PID 1: forwards SIGTERM to node (graceful shutdown) and reaps zombies.
ENTRYPOINT ["/usr/bin/tini", "--"]
# Services start with V8's old-generation limit at 64 MB, as `npm start` does
# (packages/shared/src/node-flags.ts: a full collection every half second under
# ingest otherwise), tracking with a young generation of 8 MB semi-spaces (its
# peak RSS under ingest); the container's memory limit sizes the heap's maximum.

FROM runtime AS gateway
COPY --from=build /pruned/gateway/json/ ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/services/gateway/dist services/gateway/dist
USER node
EXPOSE 8080 9464
CMD ["node", "--enable-source-maps", "--initial-old-space-size=64", "services/gateway/dist/main.js"]

FROM runtime AS catalog
COPY --from=build /pruned/catalog/json/ ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/services/catalog/dist services/catalog/dist
USER node
EXPOSE 9464
CMD ["node", "--enable-source-maps", "--initial-old-space-size=64", "services/catalog/dist/main.js"]

FROM runtime AS tracking
COPY --from=build /pruned/tracking/json/ ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/services/tracking/dist services/tracking/dist
USER node
EXPOSE 9464
CMD ["node", "--enable-source-maps", "--initial-old-space-size=64", "--max-semi-space-size=8", "services/tracking/dist/main.js"]

FROM runtime AS reporting
COPY --from=build /pruned/reporting/json/ ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/services/reporting/dist services/reporting/dist
USER node
EXPOSE 9464
CMD ["node", "--enable-source-maps", "--initial-old-space-size=64", "services/reporting/dist/main.js"]

# The migrator: the shared package's production dependencies, its bundle and the migrations.
FROM runtime AS migrate
COPY --from=build /pruned/shared/json/ ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/packages/shared/dist packages/shared/dist
COPY --from=build /app/prisma prisma
USER node
CMD ["node", "--enable-source-maps", "packages/shared/dist/migrate.js"]
