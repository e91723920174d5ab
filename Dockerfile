# syntax=docker/dockerfile:1.7
# One image build, one target per service: gateway, catalog, tracking, reporting, migrate.
# Services run their TypeScript with tsx (a runtime dependency); there is no separate emit step.

FROM node:20.20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
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
 && npx turbo run typecheck

FROM node:20.20-bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
COPY packages/shared/package.json packages/shared/
COPY services/gateway/package.json services/gateway/
COPY services/catalog/package.json services/catalog/
COPY services/tracking/package.json services/tracking/
COPY services/reporting/package.json services/reporting/
COPY tests/package.json tests/
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
# Sources only (with the generated Prisma clients): nothing from the build
# stage's node_modules, which hold the dev dependencies.
COPY --from=build /app/packages/shared/src packages/shared/src
COPY --from=build /app/services/gateway/src services/gateway/src
COPY --from=build /app/services/catalog/src services/catalog/src
COPY --from=build /app/services/tracking/src services/tracking/src
COPY --from=build /app/services/reporting/src services/reporting/src
COPY --from=build /app/prisma prisma
COPY --from=build /app/scripts/migrate.ts scripts/migrate.ts
# tsx compiles with the repository's compiler options, as in `npm start`.
COPY --from=build /app/tsconfig.json /app/tsconfig.base.json ./
# The image's unprivileged "node" user (uid 1000; the manifests' runAsUser).
USER node
# tini as PID 1: forwards SIGTERM to node (graceful shutdown) and reaps zombies.
ENTRYPOINT ["/usr/bin/tini", "--"]

FROM runtime AS gateway
EXPOSE 8080 9464
CMD ["node", "--import", "tsx", "services/gateway/src/main.ts"]

FROM runtime AS catalog
EXPOSE 9464
CMD ["node", "--import", "tsx", "services/catalog/src/main.ts"]

FROM runtime AS tracking
EXPOSE 9464
CMD ["node", "--import", "tsx", "services/tracking/src/main.ts"]

FROM runtime AS reporting
EXPOSE 9464
CMD ["node", "--import", "tsx", "services/reporting/src/main.ts"]

FROM runtime AS migrate
CMD ["node", "--import", "tsx", "scripts/migrate.ts"]
