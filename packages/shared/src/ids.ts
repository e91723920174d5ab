import { pooledUlid } from "./random.ts";

/** Request ids are ULIDs: sortable, and unique across gateway replicas. */
export const newRequestId = (): string => pooledUlid();
