/** The public API of @whereabouts/shared. Services import only from here. */
export * from "./errors.ts";
export * from "./ids.ts";
export * from "./logger.ts";
export * from "./config.ts";
export * from "./rpc.ts";
export * from "./subjects.ts";
export * from "./nats.ts";
export * from "./db.ts";
export * from "./paths.ts";
export * from "./validation.ts";
export * from "./service.ts";
export * from "./consumer.ts";
export * from "./contracts/common.ts";
export * from "./contracts/catalog.ts";
export * from "./contracts/catalog-requests.ts";
export * from "./contracts/tracking.ts";
export * from "./contracts/reporting.ts";
