# One image per service: docker build --build-arg SERVICE=edge-gateway .
# TypeScript runs through tsx (a runtime dependency), so there is no build step.
FROM node:22-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages packages
COPY services services
COPY proto proto
COPY scripts scripts
COPY bench/package.json bench/package.json
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
ARG SERVICE
WORKDIR /app/services/${SERVICE}
USER node
# node directly (not npm) so SIGTERM reaches the service and it drains gracefully.
CMD ["node", "--import", "tsx", "src/main.ts"]
