import { pooledUlid } from "./random.ts";

/** Request ids are ULIDs: sortable, and unique across gateway replicas. */
export const newRequestId = (): string => pooledUlid();

/** Event ids are ULIDs too, from the same pooled randomness (a plain `ulid()` asks the OS 16 times per id). */
export const newEventId = (): string => pooledUlid();
